package proxy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// brokenBody is a client's body whose next Read fails, as net/http's
// HTTP/2 one does once closed ("body closed by handler"), or once the
// client's connection broke.
type brokenBody struct {
	io.Reader
	err    error
	closed bool
}

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("body closed by handler")
	}
	n, err := b.Reader.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *brokenBody) Close() error { b.closed = true; return nil }

// TestClientBodyClosedByTheGateway: the Transport closes the request body
// once an upstream's answer came, and its writer may still make the Read
// that looks for the body's end after that. That Read fails, but the
// client sent its whole body: marked failed, it made a login's 401 an
// abandoned call that a countOn failure rule did not charge, and a third
// guess passed (TestFailureCountsAnAnswerWhoseBodyBroke, on a busy
// machine). A body that broke on the client's side is still failed.
func TestClientBodyClosedByTheGateway(t *testing.T) {
	for _, tc := range []struct {
		name       string
		closeFirst bool
		clientErr  error
		wantFailed bool
	}{
		{"read after the gateway closed it", true, nil, false},
		{"the client's connection broke", false, io.ErrUnexpectedEOF, true},
		{"read to its end", false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &brokenBody{Reader: strings.NewReader("pw"), err: tc.clientErr}
			b := &clientBody{rc: rc}
			buf := make([]byte, 2)
			if n, err := b.Read(buf); n != 2 || err != nil {
				t.Fatalf("first Read = %d, %v", n, err)
			}
			if tc.closeFirst {
				_ = b.Close()
			}
			if _, err := b.Read(buf); err == nil {
				t.Fatal("the Read after the body's end did not fail")
			}
			if b.failed.Load() != tc.wantFailed {
				t.Errorf("failed = %v, want %v", b.failed.Load(), tc.wantFailed)
			}
		})
	}
}

// TestClientBodyClosedByTheServer: net/http's HTTP/1 server reads the
// rest of a request body and closes it, under the gateway's wrapper, when
// the answer's head is written; the Transport's Read that looks for the
// body's end can come after that, and fails. The client sent it all.
func TestClientBodyClosedByTheServer(t *testing.T) {
	failed := make(chan bool, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := &clientBody{rc: r.Body, rw: w}
		buf := make([]byte, 2)
		if _, err := io.ReadFull(b, buf); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusUnauthorized)
		w.(http.Flusher).Flush()
		if _, err := b.Read(buf); err == nil {
			t.Error("the Read after the answer's head did not fail")
		}
		failed <- b.failed.Load()
	}))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("pw"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if <-failed {
		t.Error("a body the client sent whole was marked failed")
	}
}
