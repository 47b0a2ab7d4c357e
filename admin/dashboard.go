package admin

import (
	"embed"
	"io/fs"
	"net/http"
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
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'")
	w.Header().Set("X-Frame-Options", "DENY")
	_, _ = w.Write(page)
}

func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	sub, _ := fs.Sub(webFS, "web")
	w.Header().Set("Cache-Control", "no-cache")
	http.StripPrefix("/static/", http.FileServer(http.FS(sub))).ServeHTTP(w, r)
}
