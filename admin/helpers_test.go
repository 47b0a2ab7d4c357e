package admin_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"sluice/admin"
	"sluice/config"
	"sluice/internal/alloctest"
)

// validate is what main.go passes as Options.Validate: config.Parse.
func validate(path string, data []byte) error {
	_, err := config.Parse(path, data)
	return err
}

// fixture is an admin Server over a copy of testdata/rules.yaml.
type fixture struct {
	path    string
	srv     *admin.Server
	ts      *httptest.Server
	reloads atomic.Int32
}

func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
	orig, err := os.ReadFile("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{path: filepath.Join(t.TempDir(), "rules.yaml")}
	if err := os.WriteFile(f.path, orig, 0o640); err != nil {
		t.Fatal(err)
	}
	f.srv = admin.New(admin.Options{
		Token:      token,
		ConfigPath: f.path,
		Validate:   validate,
		Reload:     func() { f.reloads.Add(1) },
		State:      func() admin.State { return admin.State{Ready: true, Path: f.path} },
	})
	f.ts = httptest.NewServer(f.srv.Handler())
	t.Cleanup(f.ts.Close)
	return f
}

func (f *fixture) file(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// do sends a request and returns status, body and the response's ETag.
func (f *fixture) do(t *testing.T, method, path string, hdr map[string]string, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String(), resp.Header.Get("ETag")
}

func (f *fixture) etag(t *testing.T) string {
	t.Helper()
	code, _, etag := f.do(t, "GET", "/api/rules/raw", nil, "")
	if code != 200 || etag == "" {
		t.Fatalf("GET /api/rules/raw: %d, etag %q", code, etag)
	}
	return etag
}

// putRule edits flowRules/0 with body as contentType, on the file's
// current ETag, and returns the answer and the bytes the server allocated
// answering it (alloctest.Bytes).
func (f *fixture) putRule(t *testing.T, contentType, body string) (code int, answer string, alloc uint64) {
	t.Helper()
	etag := f.etag(t)
	alloc = alloctest.Bytes(func() {
		code, answer, _ = f.do(t, "PUT", "/api/rules/flowRules/0", map[string]string{"If-Match": etag, "Content-Type": contentType}, body)
	})
	return code, answer, alloc
}
