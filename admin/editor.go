package admin

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"gopkg.in/yaml.v3"

	"sluice/config"
	"sluice/internal/atomicfile"
)

// maxEditBody bounds a rule edit's body; a rule is a few hundred bytes.
// The document the edit makes is bounded by config.MaxDocumentBytes.
const maxEditBody = 1 << 20

// maxEditDepth bounds how deep an edit's fields nest. No rule field nests
// past a few levels (a param rule's items, an API group's match list); a
// body of 9,000 nested objects, 54 KB, became a block-style YAML document
// of 81 MB, indented anew at every level, which the gateway built whole
// (800 MB of heap) before the rules document's size limit refused it.
const maxEditDepth = 16

// maxEditNodes bounds the YAML nodes of an edit's body (keys, values,
// list items, as config.CountNodes counts them, JSON alike), before it is
// decoded: a rule has about twenty fields, and its longest lists (a param
// rule's items, an authority rule's ips, an API group's match) hold tens
// to thousands of entries; 100,000 is about 10,000 param items or 50,000
// IPs. The 1 MiB body limit alone let "[1,1,...]" in 1 MiB, half a
// million items, expand into a block-style document and its node trees:
// 657 MB of heap as JSON, 756 MB as YAML, before the edited document was
// refused. The edited document is then held to config.MaxDocumentNodes by
// its validation.
const maxEditNodes = 100_000

var errTooDeep = fmt.Errorf("admin: the rule's fields nest more than %d levels deep, deeper than any rule field", maxEditDepth)

// valueDepth is how deep decoded JSON v nests (a scalar: 0), counted up
// to past limit only.
func valueDepth(v any, limit int) int {
	deepest := 0
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			if deepest = max(deepest, valueDepth(e, limit-1)); deepest >= limit {
				break
			}
		}
	case []any:
		for _, e := range t {
			if deepest = max(deepest, valueDepth(e, limit-1)); deepest >= limit {
				break
			}
		}
	default:
		return 0
	}
	return deepest + 1
}

// nodeDepth is valueDepth for a YAML node (aliases are not followed: yaml.v3
// bounds what they expand to).
func nodeDepth(n *yaml.Node, limit int) int {
	if n.Kind != yaml.MappingNode && n.Kind != yaml.SequenceNode && n.Kind != yaml.DocumentNode {
		return 0
	}
	deepest := 0
	for _, c := range n.Content {
		if deepest = max(deepest, nodeDepth(c, limit-1)); deepest >= limit {
			break
		}
	}
	return deepest + 1
}

// editableSection reports whether name is a rules.yaml section the editor edits.
func editableSection(name string) bool {
	switch name {
	case "routes", "apiGroups", "authorityRules", "flowRules", "paramRules", "degradeRules":
		return true
	}
	return false
}

// etagOf is the entity tag of a version of rules.yaml: a hash of its bytes, so
// any change on disk, by any writer, changes it. Keyed by a secret of this
// process (HMAC-SHA-256): the tag is served to every reader of
// /api/rules/raw, and a plain hash of the bytes, beside the text with its
// secrets masked, let a reader try guesses of a secret offline until one
// hashed to the tag (a 4-character token fell in 2.7 s). A tag thus names
// a version for this process only: a page read before a restart is told
// 409 and reads the file again.
func (s *Server) etagOf(data []byte) string {
	mac := hmac.New(sha256.New, s.etagKey[:])
	mac.Write(data)
	return `"` + hex.EncodeToString(mac.Sum(nil)[:16]) + `"`
}

// etagMatches compares an If-Match value with the current tag, accepting the
// tag with or without quotes and a weak prefix.
func etagMatches(ifMatch, current string) bool {
	for _, v := range strings.Split(ifMatch, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || strings.Trim(v, `"`) == strings.Trim(current, `"`) {
			return true
		}
	}
	return false
}

// configFile is the file the editor reads and writes: ConfigPath with
// symlinks resolved, so an atomic rename replaces the target, not the link.
func (s *Server) configFile() string {
	if p, err := filepath.EvalSymlinks(s.opts.ConfigPath); err == nil {
		return p
	}
	return s.opts.ConfigPath
}

// rawJSON is the body of GET /api/rules/raw.
type rawJSON struct {
	Path string `json:"path"`
	ETag string `json:"etag"` // of the file's real bytes
	Text string `json:"text"` // with secrets masked
	// Sections holds the editable sections' rules as written in the file,
	// by index, so the editor addresses the file, not the rules in force.
	Sections   map[string][]map[string]any `json:"sections"`
	ParseError string                      `json:"parseError,omitempty"`
	// Version is the fleet document's version (Options.Document); 0 for a file.
	Version int64 `json:"version,omitempty"`
}

func (s *Server) rawRules(w http.ResponseWriter, r *http.Request) {
	if s.opts.Document != nil {
		s.rawDocument(w, r)
		return
	}
	if s.opts.ConfigPath == "" {
		writeError(w, http.StatusNotFound, "admin: no rules file configured")
		return
	}
	data, err := config.ReadFile(s.configFile())
	if missing(s.configFile(), err) {
		writeError(w, http.StatusNotFound, "admin: the rules file "+s.opts.ConfigPath+" does not exist")
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "admin: reading rules file: "+err.Error())
		return
	}
	out := rawOf(s.opts.ConfigPath, s.etagOf(data), data)
	s.withholdCredentials(r, &out, data)
	w.Header().Set("ETag", out.ETag)
	writeJSON(w, http.StatusOK, out)
}

// withholdCredentials leaves the text and the rules out of out, the raw
// rules data as rawOf made it, for a reader who could not write, when the
// rules name credentials as values (config.Config.WithoutCredentials):
// /api/rules shows them masked, but the text keeps them where the file
// has them, comments and anchors included, and could not mask them all.
func (s *Server) withholdCredentials(r *http.Request, out *rawJSON, data []byte) {
	if !namesCredentials(data) || s.mayWrite(r) {
		return
	}
	out.Text = "# The text is withheld from a reader without the admin token: the rules name credentials (item values of a param rule keyed on a credential, or origins read from one). Send Authorization: Bearer <admin token>.\n"
	out.Sections = nil
}

// namesCredentials reports whether the rules data name a credential as a
// value, as config.Config.WithoutCredentials would mask it; data that does
// not read as rules (a file that fails to load while the rules in force
// serve) could name one anywhere: true.
func namesCredentials(data []byte) bool {
	if over, _ := config.CountNodes(data, config.MaxDocumentNodes); over {
		return true // not parsed: it could name one
	}
	var doc struct {
		Origin struct {
			From string `yaml:"from"`
		} `yaml:"origin"`
		FlowRules []struct {
			LimitApp string `yaml:"limitApp"`
		} `yaml:"flowRules"`
		AuthorityRules []struct {
			LimitApp string `yaml:"limitApp"`
		} `yaml:"authorityRules"`
		ParamRules []struct {
			Param string             `yaml:"param"`
			Items []config.ParamItem `yaml:"items"`
		} `yaml:"paramRules"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		// A type error leaves the rest read, but a key written twice
		// drops its whole mapping: what does not read could name one.
		return true
	}
	var cfg config.Config
	if src, err := config.ParseSource(doc.Origin.From); err == nil {
		cfg.Origin.From = src
	}
	for _, fr := range doc.FlowRules {
		cfg.FlowRules = append(cfg.FlowRules, config.FlowRule{LimitApp: fr.LimitApp})
	}
	for _, ar := range doc.AuthorityRules {
		cfg.AuthorityRules = append(cfg.AuthorityRules, config.AuthorityRule{LimitApp: ar.LimitApp})
	}
	for _, pr := range doc.ParamRules {
		key, err := config.ParseKey(pr.Param)
		if err != nil && len(pr.Items) > 0 {
			return true // a param that does not parse may still read a credential
		}
		cfg.ParamRules = append(cfg.ParamRules, config.ParamRule{Param: key, Items: pr.Items})
	}
	_, masked := cfg.WithoutCredentials()
	return masked
}

// rawOf is the editor's view of a version of the rules: its text with
// secrets masked and the editable sections' rules by index.
func rawOf(path, etag string, data []byte) rawJSON {
	// Masking the text and listing the rules parse it whole: not a
	// document config refuses unparsed.
	if err := config.CheckNodes(path, data, "rules document"); err != nil {
		return rawJSON{Path: path, ETag: etag, ParseError: err.Error(),
			Text: "# The text is withheld: the document holds too many YAML nodes to be parsed and its secrets masked.\n"}
	}
	text, ok := redactSecrets(data)
	if !ok {
		text = "# The file's text is withheld: it holds a secret that could not be masked.\n"
	}
	out := rawJSON{Path: path, ETag: etag, Text: text}
	var doc struct {
		Routes       []map[string]any `yaml:"routes"`
		APIGroups    []map[string]any `yaml:"apiGroups"`
		Authority    []map[string]any `yaml:"authorityRules"`
		FlowRules    []map[string]any `yaml:"flowRules"`
		ParamRules   []map[string]any `yaml:"paramRules"`
		DegradeRules []map[string]any `yaml:"degradeRules"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		out.ParseError = err.Error()
	} else {
		out.Sections = map[string][]map[string]any{
			"routes": nonNil(doc.Routes), "apiGroups": nonNil(doc.APIGroups), "authorityRules": nonNil(doc.Authority), "flowRules": nonNil(doc.FlowRules), "paramRules": nonNil(doc.ParamRules), "degradeRules": nonNil(doc.DegradeRules),
		}
	}
	return out
}

func nonNil(v []map[string]any) []map[string]any {
	if v == nil {
		return []map[string]any{}
	}
	return v
}

// editError carries the HTTP status an edit failure maps to.
type editError struct {
	code  int
	msg   string
	lines []string
}

func (e *editError) Error() string { return e.msg }

func editErr(code int, format string, args ...any) *editError {
	return &editError{code: code, msg: fmt.Sprintf(format, args...)}
}

func (s *Server) editRule(w http.ResponseWriter, r *http.Request) {
	section := chi.URLParam(r, "section")
	index, err := strconv.Atoi(chi.URLParam(r, "index"))
	switch {
	case s.opts.ConfigPath == "" && s.opts.Document == nil:
		writeError(w, http.StatusNotFound, "admin: no rules file configured")
		return
	case !editableSection(section):
		writeError(w, http.StatusNotFound, "admin: section must be routes, apiGroups, authorityRules, flowRules, paramRules or degradeRules")
		return
	case err != nil || index < 0:
		writeError(w, http.StatusNotFound, "admin: rule index must be a number from 0")
		return
	}
	ifMatch := r.Header.Get("If-Match")
	if ifMatch == "" {
		writeError(w, http.StatusPreconditionRequired, "admin: an edit needs If-Match with the ETag of the rules file it is based on")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEditBody))
	if _, over := errors.AsType[*http.MaxBytesError](err); over {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("admin: the request body is over the %d MiB limit of a rule edit; nothing was written", maxEditBody>>20))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "admin: reading body: "+err.Error())
		return
	}
	patch, err := parseEdit(r.Header.Get("Content-Type"), body)
	if ee, ok := errors.AsType[*editError](err); ok {
		writeError(w, ee.code, ee.msg)
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}

	apply := s.applyEdit
	if s.opts.Document != nil {
		apply = s.applyDocumentEdit
	}
	etag, err := apply(r.Context(), section, index, ifMatch, patch)
	if err != nil {
		var ee *editError
		if !errors.As(err, &ee) {
			ee = &editError{code: http.StatusInternalServerError, msg: err.Error()}
		}
		s.opts.Log.Warn().Str("section", section).Int("index", index).Int("status", ee.code).Str("error", ee.msg).Msg("admin: rule edit refused")
		if ee.code == http.StatusConflict {
			w.Header().Set("ETag", etag)
		}
		writeError(w, ee.code, ee.msg, ee.lines...)
		return
	}
	s.opts.Log.Info().Str("section", section).Int("index", index).Str("remote", r.RemoteAddr).Str("etag", etag).Msg("admin: rule edited, reload requested")
	w.Header().Set("ETag", etag)
	writeJSON(w, http.StatusOK, map[string]any{"etag": etag, "section": section, "index": index, "status": "saved; reload requested"})
}

// applyEdit does the read, compare, edit, validate, write and reload of one
// edit under editMu. It returns the new ETag, or on a 409 the current one.
func (s *Server) applyEdit(_ context.Context, section string, index int, ifMatch string, patch ruleEdit) (string, error) {
	s.editMu.Lock()
	defer s.editMu.Unlock()
	path := s.configFile()
	data, err := config.ReadFile(path)
	if missing(path, err) {
		return "", editErr(http.StatusNotFound, "admin: the rules file %s does not exist", s.opts.ConfigPath)
	}
	if err != nil {
		return "", fmt.Errorf("admin: reading rules file: %w", err)
	}
	cur := s.etagOf(data)
	if !etagMatches(ifMatch, cur) {
		return cur, editErr(http.StatusConflict, "admin: rules file changed on disk since it was read (ETag %s, now %s); reload it and edit again", ifMatch, cur)
	}
	// Messages name the file as configured, not a symlink's target.
	next, err := editedRules(data, section, index, patch, s.opts.ConfigPath, "rules file", func(next []byte) error { return s.validate(s.opts.ConfigPath, next) })
	if err != nil || next == nil {
		return cur, err // next == nil: nothing changed, no write, no reload
	}
	// Validation can take seconds; a save made meanwhile (vi, a deploy) must
	// not be overwritten, so the file is compared again just before the rename.
	if err := writeFileAtomic(path, next, data); err != nil {
		if !errors.Is(err, atomicfile.ErrChanged) {
			return "", err
		}
		if now, rerr := config.ReadFile(path); rerr == nil {
			cur = s.etagOf(now)
		}
		return cur, editErr(http.StatusConflict, "admin: rules file changed on disk while the edit was checked (ETag %s, now %s); nothing was written; reload it and edit again", ifMatch, cur)
	}
	s.opts.Reload()
	return s.etagOf(next), nil
}

// editedRules applies patch to the rule at section[index] of data and
// validates the result; nil (and no error) means the edit changes nothing.
func editedRules(data []byte, section string, index int, patch ruleEdit, name, what string, validate func([]byte) error) ([]byte, error) {
	// replaceRule parses the document whole, as config would refuse to.
	if err := config.CheckNodes(name, data, what); err != nil {
		ee := editErr(http.StatusUnprocessableEntity, "admin: the %s is too large to edit (config refuses it unparsed); nothing was written", what)
		ee.lines = []string{err.Error()}
		return nil, ee
	}
	next, err := replaceRule(data, section, index, patch)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(next, data) {
		return nil, nil
	}
	if len(next) > config.MaxDocumentBytes {
		return nil, editErr(http.StatusRequestEntityTooLarge, "admin: %s; nothing was written", config.TooLarge("the edited "+what, int64(len(next))))
	}
	if err := validate(next); err != nil {
		ee := editErr(http.StatusUnprocessableEntity, "admin: the edited %s is invalid; nothing was written", what)
		ee.lines = strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
		return nil, ee
	}
	return next, nil
}

func (s *Server) validate(path string, data []byte) error {
	if s.opts.Validate != nil {
		return s.opts.Validate(path, data)
	}
	var v any
	return yaml.Unmarshal(data, &v)
}

// ruleEdit is one requested change of a rule: either fields merged into it
// (RFC 7396: a key set to null is removed, keys not named are kept with their
// comments) or a whole new rule.
type ruleEdit struct {
	fields  map[string]any
	replace *yaml.Node
}

// maxEditFields bounds the fields of one edit: a rule has about twenty, and
// each field of an edit is looked for among the rule's, so that 75,000 of
// them cost 16 to 22 s of CPU before the refusal, holding every other
// edit back meanwhile (admin audit).
const maxEditFields = 256

var errTooManyFields = fmt.Errorf("admin: an edit names at most %d fields (a rule has about twenty)", maxEditFields)

// parseEdit reads an edit's body: a JSON object of fields to merge, or a YAML
// mapping (application/yaml, text/yaml) that replaces the rule.
// editNodesOver refuses (413) an edit's body of over maxEditNodes YAML
// nodes, counted before either decoder builds anything from it.
func editNodesOver(body []byte) error {
	if over, line := config.CountNodes(body, maxEditNodes); over {
		return editErr(http.StatusRequestEntityTooLarge,
			"admin: the edit holds over 100,000 YAML nodes (keys, values and list items) by line %d of its body, more than any rule; nothing was written", line)
	}
	return nil
}

func parseEdit(contentType string, body []byte) (ruleEdit, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml":
		if err := editNodesOver(body); err != nil {
			return ruleEdit{}, err
		}
		// One document: yaml.Unmarshal reads the first and drops the rest,
		// so a body with a second was applied in part, and answered 200.
		dec := yaml.NewDecoder(bytes.NewReader(body))
		var doc, extra yaml.Node
		if err := dec.Decode(&doc); err != nil && err != io.EOF {
			return ruleEdit{}, fmt.Errorf("admin: rule YAML: %w", err)
		}
		if err := dec.Decode(&extra); err != io.EOF {
			return ruleEdit{}, errors.New("admin: rule YAML must be one document (it has a second after ---)")
		}
		if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
			return ruleEdit{}, errors.New("admin: rule YAML must be one mapping of rule fields")
		}
		if nodeDepth(doc.Content[0], maxEditDepth) > maxEditDepth {
			return ruleEdit{}, errTooDeep
		}
		if len(doc.Content[0].Content)/2 > maxEditFields {
			return ruleEdit{}, errTooManyFields
		}
		return ruleEdit{replace: doc.Content[0]}, nil
	case "application/json", "":
		if err := editNodesOver(body); err != nil {
			return ruleEdit{}, err
		}
		fields, err := decodeJSONObject(body)
		if err != nil {
			return ruleEdit{}, err
		}
		if valueDepth(fields, maxEditDepth) > maxEditDepth {
			return ruleEdit{}, errTooDeep
		}
		if len(fields) > maxEditFields {
			return ruleEdit{}, errTooManyFields
		}
		for k, v := range fields {
			fields[k] = plain(v)
		}
		return ruleEdit{fields: fields}, nil
	}
	return ruleEdit{}, fmt.Errorf("admin: unsupported Content-Type %q (use application/json or application/yaml)", mt)
}

// missing reports a read of path that failed (err) because the file is
// not there: config.ReadFile says so in words, for people.
func missing(path string, err error) bool {
	if err == nil {
		return false
	}
	_, serr := os.Stat(path)
	return errors.Is(serr, fs.ErrNotExist)
}
