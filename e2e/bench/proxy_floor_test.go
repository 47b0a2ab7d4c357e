package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The proxy floor measures what a correct proxy pays only if it is one:
// the upstream gets the method, the end-to-end fields and the forwarding
// fields, never a hop-by-hop one or a client's own X-Forwarded-For, and
// the client gets the answer's status, fields and body without the
// upstream's hop-by-hop ones.
func TestProxyFloorForwardsAsAProxy(t *testing.T) {
	got := make(chan http.Header, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("Method", r.Method)
		h.Set("Target", r.URL.RequestURI())
		body, _ := io.ReadAll(r.Body)
		h.Set("Body", string(body))
		got <- h
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "1")
		w.Header()["X-Twice"] = []string{"a", "b"}
		w.Header().Set("Keep-Alive", "timeout=5")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "answer")
	}))
	defer up.Close()
	front := httptest.NewServer(proxyFloor(strings.TrimPrefix(up.URL, "http://")))
	defer front.Close()

	req, _ := http.NewRequest(http.MethodPost, front.URL+"/b/7?q=1", strings.NewReader("sent"))
	req.Header.Set("X-End", "e")
	req.Header.Set("Connection", "X-Named")
	req.Header.Set("X-Named", "hop")
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	req.Header.Set("Proxy-Authorization", "Basic eDp5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)

	h := <-got
	for k, want := range map[string]string{
		"Method": "POST", "Target": "/b/7?q=1", "Body": "sent", "X-End": "e",
		"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": strings.TrimPrefix(front.URL, "http://"),
	} {
		if h.Get(k) != want {
			t.Errorf("upstream got %s %q, want %q", k, h.Get(k), want)
		}
	}
	if v := h.Values("X-Forwarded-For"); len(v) != 1 {
		t.Errorf("upstream got X-Forwarded-For %q, want the client alone", v)
	}
	if h.Get("X-Named") != "" {
		t.Errorf("upstream got X-Named %q, which the client's Connection names", h.Get("X-Named"))
	}
	if h.Get("Proxy-Authorization") != "" {
		t.Errorf("upstream got the client's Proxy-Authorization %q, meant for the proxy", h.Get("Proxy-Authorization"))
	}
	if resp.StatusCode != http.StatusCreated || string(body) != "answer" {
		t.Errorf("client got %d %q, want 201 \"answer\"", resp.StatusCode, body)
	}
	if v := resp.Header.Values("X-Twice"); len(v) != 2 || v[0] != "a" || v[1] != "b" {
		t.Errorf("client got X-Twice %q, want [a b]", v)
	}
	for _, k := range []string{"X-Hop", "Keep-Alive"} {
		if resp.Header.Get(k) != "" {
			t.Errorf("client got the upstream's hop-by-hop %s %q", k, resp.Header.Get(k))
		}
	}
}
