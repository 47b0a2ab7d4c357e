package admin

import (
	"embed"
	"io"
	"io/fs"
	"net/http"
	"path"

	"github.com/go-chi/chi/v5"
)

// webFS is the dashboard: one HTML page, its script and style, no network
// needed at run time.
//
//go:embed web
var webFS embed.FS

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	page, err := webFS.ReadFile("web/index.html")
	if err != nil {
		http.Error(w, "admin: dashboard missing", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	// frame-ancestors, base-uri and form-action are not covered by
	// default-src: no frame, no <base> pointing scripts elsewhere, no form
	// posting off the page.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	w.Header().Set("X-Frame-Options", "DENY")
	_, _ = w.Write(page)
}

// static serves the dashboard's script and style sheets. The page itself
// (index.html) is served at / only, with the headers that keep it out of
// another site's frames: served here too, as http.FileServer would for
// /static/, it could be framed and the operator tricked into a write.
// Directories are not listed either. X-Frame-Options is set on every
// answer all the same, so that no file added to web/ can be framed.
func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	name := chi.URLParam(r, "*")
	if name == "index.html" || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	f, err := webFS.Open(path.Join("web", name))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	rs, seekable := f.(io.ReadSeeker)
	if err != nil || st.IsDir() || !seekable {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, st.ModTime(), rs)
}
