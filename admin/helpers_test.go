package admin_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"gopkg.in/yaml.v3"

	"sluice/admin"
)

// fakeValidate stands in for config.Parse, which is being written at the same
// time: it checks what these tests need (known flow-rule fields, count >= 0)
// and reports problems as config does, one "file:line: path: message" a line.
func fakeValidate(path string, data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	known := map[string]bool{"resource": true, "limitApp": true, "grade": true, "count": true, "strategy": true,
		"refResource": true, "controlBehavior": true, "warmUpPeriodSec": true, "coldFactor": true,
		"maxQueueingTimeMs": true, "statIntervalMs": true, "dryRun": true, "clusterMode": true, "clusterConfig": true}
	var errs []string
	root := doc.Content[0]
	for k := 0; k+1 < len(root.Content); k += 2 {
		if root.Content[k].Value != "flowRules" {
			continue
		}
		for i, rule := range root.Content[k+1].Content {
			for j := 0; j+1 < len(rule.Content); j += 2 {
				key, val := rule.Content[j], rule.Content[j+1]
				if !known[key.Value] {
					errs = append(errs, fmt.Sprintf("%s:%d: flowRules[%d].%s: unknown field", path, key.Line, i, key.Value))
				}
				var n float64
				if key.Value == "count" && (val.Decode(&n) != nil || n < 0) {
					errs = append(errs, fmt.Sprintf("%s:%d: flowRules[%d].count: must be a number >= 0, got %s", path, val.Line, i, val.Value))
				}
			}
		}
	}
	if errs != nil {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
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
		Validate:   fakeValidate,
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
