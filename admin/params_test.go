package admin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sluice/admin"
	"sluice/config"
	"sluice/hotparam"
)

// userKey is one value per request, for a checker built here.
type userKey string

func (u userKey) Values(config.Key) ([]string, bool) { return []string{string(u)}, true }

// paramsServer is an admin Server over one param rule of resource "login"
// (2 calls per minute per value), the way lifecycle wires it; now is fixed.
func paramsServer(t *testing.T, token string, log *bytes.Buffer) (*admin.Server, *hotparam.Checker) {
	return paramsServerOn(t, "header:X-User", token, log)
}

// paramsServerOn is paramsServer with the rule's param; its pk of a value
// is fakePK's.
func paramsServerOn(t *testing.T, param, token string, log *bytes.Buffer) (*admin.Server, *hotparam.Checker) {
	t.Helper()
	key, err := config.ParseKey(param)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{ParamRules: []config.ParamRule{{Resource: "login",
		Param: key, Count: 2, DurationSec: 60, Line: 7}}}
	config.Defaults(&cfg)
	c := hotparam.Compile(cfg.ParamRules, nil).For("login")
	known := map[string]bool{"login": true, "other": true}
	o := admin.Options{
		Token: token,
		Params: func(res string, values []string, top int) ([]hotparam.RuleState, bool) {
			if !known[res] {
				return nil, false
			}
			if res != "login" {
				return nil, true
			}
			return c.Report(1, values, top), true
		},
		LiftParam: func(ctx context.Context, res, value string) (admin.Lifted, bool, error) {
			if !known[res] {
				return admin.Lifted{}, false, nil
			}
			n, err := c.Forget(ctx, value)
			return admin.Lifted{Rules: n, Credential: key.Credential()}, true, err
		},
		PartitionKey: fakePK,
	}
	if log != nil {
		o.Log = zerolog.New(log)
	}
	return admin.New(o), c
}

// fakePK stands for the gateway's keyed hash: the value in hex.
func fakePK(v string) string { return hex.EncodeToString([]byte(v)) }

func serve(srv *admin.Server, method, target, peer string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr, req.Host = peer, "127.0.0.1:9090"
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec
}

type paramsBody struct {
	Resource string `json:"resource"`
	Rules    []struct {
		Rule   int  `json:"rule"`
		Masked bool `json:"masked"`
		Config struct {
			Line  int     `json:"line"`
			Count float64 `json:"count"`
		} `json:"config"`
		Values []struct {
			Value        string  `json:"value"`
			PK           string  `json:"pk"`
			ValueBase64  string  `json:"valueBase64"`
			UTF8         bool    `json:"utf8"`
			Tracked      bool    `json:"tracked"`
			Passes       float64 `json:"passes"`
			Blocks       float64 `json:"blocks"`
			Remaining    float64 `json:"remaining"`
			NextTokenSec float64 `json:"nextTokenSec"`
		} `json:"values"`
	} `json:"rules"`
}

func decodeParams(t *testing.T, rec *httptest.ResponseRecorder) paramsBody {
	t.Helper()
	if rec.Code != 200 {
		t.Fatalf("%d: %s", rec.Code, rec.Body)
	}
	var b paramsBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// GET /api/params lists the values with the most blocks, each with the
// bytes the client sent (hostile ones included), and peeks at values by
// &value=; an unknown resource is 404.
func TestAPIParams(t *testing.T) {
	srv, c := paramsServer(t, "", nil)
	hostile := "<img src=x onerror=alert(1)>\xff\"\n"
	for v, calls := range map[string]int{"alice": 12, hostile: 7, "bob": 2} {
		for range calls {
			c.Enter(1, userKey(v), 1)
		}
	}
	rec := serve(srv, "GET", "/api/params?resource=login", network)
	if strings.Contains(rec.Body.String(), "<img") {
		t.Fatalf("a value's markup reached the JSON unescaped: %s", rec.Body)
	}
	b := decodeParams(t, rec)
	if len(b.Rules) != 1 || b.Rules[0].Config.Line != 7 || len(b.Rules[0].Values) != 2 {
		t.Fatalf("body: %+v", b)
	}
	top := b.Rules[0].Values
	raw, _ := base64.StdEncoding.DecodeString(top[1].ValueBase64)
	if top[0].Value != "alice" || top[0].Blocks != 10 || top[0].Passes != 2 ||
		string(raw) != hostile || top[1].UTF8 || top[1].Blocks != 5 {
		t.Errorf("top values: %+v", top)
	}
	b = decodeParams(t, serve(srv, "GET", "/api/params?resource=login&value=bob&value=carol", network))
	if vs := b.Rules[0].Values; len(vs) != 2 || vs[0].Remaining != 0 || vs[0].NextTokenSec <= 0 || !vs[0].Tracked ||
		vs[1].Tracked || vs[1].Remaining != 2 {
		t.Errorf("peek: %+v", vs)
	}
	if b := decodeParams(t, serve(srv, "GET", "/api/params?resource=other", network)); len(b.Rules) != 0 {
		t.Errorf("a resource without param rules: %+v", b)
	}
	for target, want := range map[string]int{
		"/api/params?resource=nope":                                    404,
		"/api/params":                                                  400,
		"/api/params?resource=login&value=%zz":                         400, // not the top list in its place
		"/api/params?resource=login&value=bob;x=1":                     400,
		"/api/params?resource=login&value=bob%2Gxx":                    400,
		"/api/params?resource=login" + strings.Repeat("&value=v", 101): 400, // at most 100 values: each a read per rule, in Redis for a clusterMode rule
	} {
		if rec := serve(srv, "GET", target, network); rec.Code != want {
			t.Errorf("GET %s: %d, want %d: %s", target, rec.Code, want, rec.Body)
		}
	}
}

// DELETE /api/params lifts a value, guarded like every write; each lift
// is logged once, with the value as sent.
func TestAPIParamsLift(t *testing.T) {
	var log bytes.Buffer
	srv, c := paramsServer(t, "", &log)
	locked := "mallory\x00\xfe"
	for range 5 {
		c.Enter(1, userKey(locked), 1)
	}
	lift := "/api/params?resource=login&value=" + url.QueryEscape(locked)
	for _, tc := range []struct {
		token, target, peer string
		hdr                 []string
		want                int
	}{
		{"", lift, network, nil, 403},
		{"", lift, loopback, []string{"Origin: http://evil.example"}, 403},
		{"t", lift, loopback, nil, 401},
		{"t", lift, network, []string{"Authorization: Bearer wrong"}, 401},
		{"t", "/api/params?resource=nope&value=x", network, []string{"Authorization: Bearer t"}, 404},
		{"t", "/api/params?resource=login", network, []string{"Authorization: Bearer t"}, 400},
		{"t", "/api/params?value=x", network, []string{"Authorization: Bearer t"}, 400},
		{"t", "/api/params?resource=login&value=%zz", network, []string{"Authorization: Bearer t"}, 400},
	} {
		srv.SetToken(tc.token)
		if rec := serve(srv, "DELETE", tc.target, tc.peer, tc.hdr...); rec.Code != tc.want {
			t.Errorf("token %q: DELETE %s from %s %q: %d, want %d: %s", tc.token, tc.target, tc.peer, tc.hdr, rec.Code, tc.want, rec.Body)
		}
	}
	if _, v := c.Enter(1, userKey(locked), 1); !v.Blocked {
		t.Fatal("a refused DELETE lifted the value")
	}
	srv.SetToken("t")
	if rec := serve(srv, "DELETE", lift, network, "Authorization: Bearer t"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"rules":1`) {
		t.Fatalf("DELETE with the token: %d %s", rec.Code, rec.Body)
	}
	if _, v := c.Enter(1, userKey(locked), 1); v.Blocked {
		t.Fatal("still blocked after the lift")
	}
	srv.SetToken("")
	if rec := serve(srv, "DELETE", lift, loopback); rec.Code != 200 {
		t.Fatalf("DELETE from a loopback peer without a token: %d %s", rec.Code, rec.Body)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "admin: param value lifted" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 2 || lines[0]["resource"] != "login" || lines[0]["value"] != strings.ToValidUTF8(locked, "\ufffd") || lines[0]["rules"] != 1.0 {
		t.Errorf("lift log lines: %v\n%s", lines, log.String())
	}
}
