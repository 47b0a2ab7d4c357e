package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// Document is a fleet's shared rules document, written with compare-and-set
// (docs/fleet.md). With Options.Document set, the editor reads and writes it
// instead of the rules file, and its version is the ETag.
type Document interface {
	// Name names the document in messages (redis://HOST/DB/KEY).
	Name() string
	// Pull returns the stored version (0: none) and its text.
	Pull(ctx context.Context) (version int64, text []byte, err error)
	// Push stores text as the next version if basedOn is still the stored
	// one; otherwise it stores nothing and returns an error that
	// errors.Is(err, ErrConflict).
	Push(ctx context.Context, text []byte, basedOn int64) (version int64, err error)
	// Validate checks text as every gateway will: merged with the
	// gateway's own rules file.
	Validate(text []byte) error
}

// ErrConflict is what Document.Push returns (wrapped or as is) when another
// writer stored a version first.
var ErrConflict = errors.New("admin: another writer stored a version first")

// docETag is the entity tag of a document version.
func docETag(version int64) string { return `"v` + strconv.FormatInt(version, 10) + `"` }

// docVersion reads a version back from an If-Match value; -1 if it names none.
func docVersion(ifMatch string) int64 {
	v := strings.TrimPrefix(strings.Trim(strings.TrimPrefix(strings.TrimSpace(ifMatch), "W/"), `"`), "v")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func (s *Server) rawDocument(w http.ResponseWriter, r *http.Request) {
	d := s.opts.Document
	v, text, err := d.Pull(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "admin: reading the rules document "+d.Name()+": "+err.Error())
		return
	}
	out := rawOf(d.Name(), docETag(v), text)
	s.withholdCredentials(r, &out, text)
	out.Version = v
	w.Header().Set("ETag", out.ETag)
	writeJSON(w, http.StatusOK, out)
}

// applyDocumentEdit is applyEdit for the fleet's document: the compare and
// the write are one compare-and-set in Redis, so a writer elsewhere (another
// gateway's editor, sluice rules push) that came first gets this edit a 409.
// The gateways apply the new version from the source; no reload is asked.
func (s *Server) applyDocumentEdit(ctx context.Context, section string, index int, ifMatch string, patch ruleEdit) (string, error) {
	s.editMu.Lock()
	defer s.editMu.Unlock()
	d := s.opts.Document
	v, data, err := d.Pull(ctx)
	if err != nil {
		return "", editErr(http.StatusServiceUnavailable, "admin: reading the rules document %s: %v", d.Name(), err)
	}
	cur := docETag(v)
	if ifMatch != "*" && docVersion(ifMatch) != v {
		return cur, editErr(http.StatusConflict, "admin: the rules document changed since it was read (ETag %s, now %s); reload it and edit again", ifMatch, cur)
	}
	next, err := editedRules(data, section, index, patch, d.Name(), "rules document", d.Validate)
	if err != nil || next == nil {
		return cur, err
	}
	nv, err := d.Push(ctx, next, v)
	switch {
	case errors.Is(err, ErrConflict):
		if now, _, perr := d.Pull(ctx); perr == nil {
			cur = docETag(now)
		}
		return cur, editErr(http.StatusConflict, "admin: another writer stored a version of the rules document first (ETag %s, now %s); reload it and edit again", ifMatch, cur)
	case err != nil:
		return "", editErr(http.StatusServiceUnavailable, "admin: writing the rules document %s: %v", d.Name(), err)
	}
	return docETag(nv), nil
}
