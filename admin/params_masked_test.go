package admin_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// TestAPIParamsMasksCredentials: the top list of a param rule that reads a
// credential (an API key) shows its values only to a reader who could
// write (the token, or without one a loopback peer): the reads are open to
// more peers than the writes, and an API key read there is a key stolen.
// The others get each value's pk, as the client's RateLimit-Policy carries
// it; a value asked for by &value= is the asker's own; a rule on another
// source is shown to all. A lift of a credential logs its pk, not it.
func TestAPIParamsMasksCredentials(t *testing.T) {
	const key = "Bearer sk-live-0123456789"
	for _, tc := range []struct {
		param, token, peer string
		hdr                []string
		query              string
		masked             bool
	}{
		{"header:X-Api-Key", "", network, nil, "", true},
		{"header:X-Api-Key", "", loopback, nil, "", false},
		{"header:X-Api-Key", "t", loopback, nil, "", true},
		{"header:X-Api-Key", "t", network, []string{"Authorization: Bearer wrong"}, "", true},
		{"header:X-Api-Key", "t", network, []string{"Authorization: Bearer t"}, "", false},
		{"header:X-Api-Key", "t", loopback, []string{"Authorization: Bearer t", "Sec-Fetch-Site: cross-site"}, "", true},
		{"header:X-Api-Key", "", network, nil, "&value=" + url.QueryEscape(key), false},
		{"header:Authorization", "", network, nil, "", true},
		{"ip+cookie:sid", "", network, nil, "", true},
		{"header:X-User", "", network, nil, "", false},
		{"header:X-User", "t", network, nil, "", false},
	} {
		srv, c := paramsServerOn(t, tc.param, tc.token, nil)
		for range 3 {
			c.Enter(1, userKey(key), 1)
		}
		rec := serve(srv, "GET", "/api/params?resource=login"+tc.query, tc.peer, tc.hdr...)
		b := decodeParams(t, rec)
		if len(b.Rules) != 1 || len(b.Rules[0].Values) != 1 {
			t.Fatalf("%+v: body %s", tc, rec.Body)
		}
		v := b.Rules[0].Values[0]
		if got := strings.Contains(rec.Body.String(), "sk-live"); got == tc.masked || b.Rules[0].Masked != tc.masked {
			t.Errorf("%s, token %q, from %s %q%s: value shown %v, masked %v; want masked %v: %s",
				tc.param, tc.token, tc.peer, tc.hdr, tc.query, got, b.Rules[0].Masked, tc.masked, rec.Body)
		}
		if v.PK != fakePK(key) || v.Blocks != 1 || v.Passes != 2 {
			t.Errorf("%s: pk %q, blocks %v, passes %v; want the value's pk and its figures either way", tc.param, v.PK, v.Blocks, v.Passes)
		}
	}

	var log bytes.Buffer
	srv, c := paramsServerOn(t, "header:X-Api-Key", "", &log)
	c.Enter(1, userKey(key), 1)
	if rec := serve(srv, "DELETE", "/api/params?resource=login&value="+url.QueryEscape(key), loopback); rec.Code != 200 {
		t.Fatalf("lift: %d %s", rec.Code, rec.Body)
	}
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(log.Bytes()), &line); err != nil {
		t.Fatalf("log %q: %v", log.String(), err)
	}
	if strings.Contains(log.String(), "sk-live") || line["pk"] != fakePK(key) {
		t.Errorf("the lift of a credential logged %s; want its pk and not the value", log.String())
	}
}
