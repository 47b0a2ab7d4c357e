package config_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"text/template"
	"time"

	"gopkg.in/yaml.v3"

	"sluice/config"
)

func ptr[T any](v T) *T { return &v }

var allMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE"}

// fullBlock is testdata/full.yaml's blockResponse, which its routes take
// unless they set their own fields.
var fullBlock = config.BlockResponse{Status: 503, ContentType: "text/plain", Body: "blocked {{.Resource}} ({{.Reason}})", RateLimitHeaders: ptr(false)}

// TestLoadFull loads a file that sets every field of rules.yaml (docs/configuration.md,
// docs/rules.md) and checks each
// value, and the defaults of the fields a few entries leave out.
func TestLoadFull(t *testing.T) {
	cfg, err := config.Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Config{
		Listen: ":8081",
		Admin:  config.Admin{Listen: ptr("127.0.0.1:9191"), Token: "s3cret", Hosts: []string{"gateway-1.internal", "*.admin.example.com"}},
		Log:    config.Log{Level: "debug", Format: "console", Access: true},
		Server: config.Server{ReadHeaderTimeout: config.Duration(5 * time.Second), IdleTimeout: config.Duration(time.Minute),
			SendTimeout: config.Duration(15 * time.Second), TunnelIdleTimeout: config.Duration(5 * time.Minute), Upgrades: []string{"websocket"}, MaxConcurrentStreams: 50, MergeSlashes: ptr(false), MaxBodyBytes: 1 << 20},
		HTTP2:          config.HTTP2{TLS: ptr(true)},
		Origin:         config.OriginConfig{From: config.Source{Kind: config.SourceHeader, Name: "X-Origin"}, Strip: true},
		TrustedProxies: []string{"10.0.0.0/8", "192.168.1.1"},
		Upstreams: map[string]config.Upstream{
			"orders": upstreamDefaults(config.Duration(5*time.Second), "http://127.0.0.1:9001", "https://orders.internal:9002"),
			"users":  upstreamDefaults(config.Duration(30*time.Second), "http://127.0.0.1:9003"),
		},
		Routes: []config.Route{
			{Path: "/order/{orderId}", Methods: []string{"GET", "POST"}, Upstream: "orders", Resource: "get-order", Entrance: "web",
				StripPrefix: "/order", AcquireCount: 2, Forwarder: "fast", OccupyTimeoutMs: 500, MaxBodyBytes: 1 << 20, BlockResponse: fullBlock, Line: 24},
			{Path: "/users/{id:[0-9]+}", Methods: allMethods, Upstream: "users", Resource: "/users/{id:[0-9]+}", Entrance: "default",
				AcquireCount: 1, Forwarder: "auto", OccupyTimeoutMs: 500, MaxBodyBytes: 1 << 20, BlockResponse: fullBlock, Line: 32},
			// Its own maxBodyBytes (0: none) and the blockResponse fields it sets.
			{Path: "/admin/*", Methods: []string{"GET"}, Upstream: "users", Resource: "get-order", Entrance: "admin",
				AcquireCount: 1, Forwarder: "auto", OccupyTimeoutMs: 500, Line: 34, BlockResponse: config.BlockResponse{Status: 503, ContentType: "text/plain",
					Body: "blocked {{.Resource}} ({{.Reason}})", Redirect: "https://status.example.com/", RateLimitHeaders: ptr(false), LegacyHeaders: true}},
		},
		AuthorityRules: []config.AuthorityRule{
			{Resource: "get-order", Strategy: config.AuthorityBlack, LimitApp: "app-a, app-b",
				IPs: []string{"10.0.0.0/8", "2001:db8::/32", "192.168.1.7"}, Line: 132},
			{Resource: "/users/{id:[0-9]+}", Strategy: config.AuthorityWhite, IPs: []string{"127.0.0.1"}, Line: 136},
		},
		FlowRules: []config.FlowRule{
			{Resource: "get-order", LimitApp: "a, b", Grade: config.GradeQPS, Count: 100.5, Strategy: config.StrategyChain, RefResource: "web",
				ControlBehavior: config.BehaviorWarmUpThrottle, WarmUpPeriodSec: 20, ColdFactor: 4, MaxQueueingTimeMs: 500, StatIntervalMs: 60000,
				DryRun: true, ClusterMode: true, ClusterConfig: config.ClusterConfig{ThresholdType: config.ThresholdAvgLocal, FallbackToLocalWhenFail: ptr(false)}, Line: 43},
			{Resource: "/users/{id:[0-9]+}", LimitApp: "default", Grade: config.GradeQPS, Count: 10, Strategy: config.StrategyDirect,
				ControlBehavior: config.BehaviorThrottle, BurstCount: 5, WarmUpPeriodSec: 10, ColdFactor: 3, MaxQueueingTimeMs: 500, StatIntervalMs: 1000,
				ClusterConfig: config.ClusterConfig{ThresholdType: config.ThresholdGlobal, FallbackToLocalWhenFail: ptr(true)}, Line: 59},
		},
		ParamRules: []config.ParamRule{
			{Resource: "get-order", Param: config.Key{{Kind: config.SourcePath, Name: "orderId"}}, Grade: config.GradeQPS, Count: 2, DurationSec: 2,
				ControlBehavior: config.BehaviorThrottle, MaxQueueingTimeMs: 100, MaxTrackedValues: 5000, DryRun: true,
				Window: config.WindowRolling, Timezone: config.DefaultTimezone, CountOn: config.CountOnRequest,
				ClusterConfig: config.ClusterConfig{ThresholdType: config.ThresholdGlobal, FallbackToLocalWhenFail: ptr(true)},
				Items:         []config.ParamItem{{Value: "102", Count: 4}, {Value: "103", Count: 0}}, Line: 65},
			{Resource: "get-order", Param: config.Key{{Kind: config.SourceQuery, Name: "id"}}, Grade: config.GradeQPS, Count: 5, DurationSec: 1,
				ControlBehavior: config.BehaviorReject, MaxTrackedValues: 100000, ClusterMode: true,
				Window: config.WindowRolling, Timezone: config.DefaultTimezone,
				ClusterConfig: config.ClusterConfig{ThresholdType: config.ThresholdAvgLocal, FallbackToLocalWhenFail: ptr(false)},
				CountOn:       config.CountOnFailure, FailureStatuses: []string{"401", "4xx"}, Line: 78},
			{Resource: "get-order", Param: config.Key{{Kind: config.SourceHeader, Name: "X-Api-Key"}}, Grade: config.GradeQPS, Count: 1000, DurationSec: 1,
				ControlBehavior: config.BehaviorReject, MaxTrackedValues: 100000, Window: config.WindowMonth, Timezone: "Europe/Berlin", ClusterMode: true,
				CountOn: config.CountOnRequest, ClusterConfig: config.ClusterConfig{ThresholdType: config.ThresholdGlobal, FallbackToLocalWhenFail: ptr(true)}, Line: 85},
		},
		DegradeRules: []config.DegradeRule{
			{Resource: "get-order", Strategy: config.DegradeSlowRatio, MaxAllowedRtMs: 200, Threshold: 0.5, StatIntervalMs: 2000,
				MinRequestAmount: 10, RetryTimeoutMs: 3000, ErrorStatuses: []string{"429", "5xx"}, ProbeNum: 3, Line: 93},
			{Resource: "get-order", Strategy: config.DegradeErrorCount, Threshold: 3, StatIntervalMs: 1000, MinRequestAmount: 5,
				RetryTimeoutMs: 5000, ErrorStatuses: []string{"5xx"}, ProbeNum: 1, Line: 102},
		},
		System:        config.System{MaxQps: 1000, MaxConcurrency: 200, MaxAvgRtMs: 300, MaxCpuUsage: 0.8, Adaptive: true},
		Cluster:       config.Cluster{RedisTarget: config.RedisTarget{Redis: "redis://127.0.0.1:6379/0"}, Namespace: "shop", Timeout: config.Duration(config.DefaultClusterTimeout)},
		BlockResponse: fullBlock,
		Path:          "testdata/full.yaml",
	}
	if !reflect.DeepEqual(cfg, want) {
		g, _ := json.MarshalIndent(cfg, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("Load:\n got %s\nwant %s", g, w)
	}
	if cfg.Server.MergesSlashes() || !(&config.Config{}).Server.MergesSlashes() {
		t.Errorf("mergeSlashes: false reads %v; unset reads %v, want true", cfg.Server.MergesSlashes(), (&config.Config{}).Server.MergesSlashes())
	}
	if cfg.AdminListen() != "127.0.0.1:9191" || cfg.BlockResponse.Headers() || cfg.FlowRules[0].ClusterConfig.Fallback() {
		t.Errorf("AdminListen/Headers/Fallback = %q/%v/%v", cfg.AdminListen(), cfg.BlockResponse.Headers(), cfg.FlowRules[0].ClusterConfig.Fallback())
	}
	if got := cfg.FlowRules[0].LimitApps(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("LimitApps = %q", got)
	}
}

var defaultBlock = config.BlockResponse{Status: 429, ContentType: "application/json",
	Body: `{"error":"blocked","resource":"{{.Resource}}","reason":"{{.Reason}}"}`, RateLimitHeaders: ptr(true)}

// TestLoadDefaults checks every default documented in docs/configuration.md
// and docs/rules.md on a minimal file.
func TestLoadDefaults(t *testing.T) {
	cfg, err := config.Load("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Config{
		Listen: config.DefaultListen,
		Admin:  config.Admin{Listen: ptr(config.DefaultAdminListen)},
		Log:    config.Log{Level: "info"}, // no format: JSON, or console on a terminal
		Server: config.Server{ReadHeaderTimeout: config.Duration(10 * time.Second), IdleTimeout: config.Duration(120 * time.Second),
			SendTimeout: config.Duration(30 * time.Second), TunnelIdleTimeout: config.Duration(5 * time.Minute), Upgrades: []string{"websocket"}, MaxConcurrentStreams: 100, MergeSlashes: ptr(true)},
		HTTP2:     config.HTTP2{TLS: ptr(true)},
		Upstreams: map[string]config.Upstream{"app": upstreamDefaults(config.Duration(30*time.Second), "http://127.0.0.1:9001")},
		Routes: []config.Route{{Path: "/api/{id}", Methods: allMethods, Upstream: "app", Resource: "/api/{id}", Entrance: "default",
			AcquireCount: 1, Forwarder: "auto", OccupyTimeoutMs: 500, BlockResponse: defaultBlock, Line: 5}},
		FlowRules: []config.FlowRule{{Resource: "/api/{id}", LimitApp: "default", Grade: "qps", Count: 10, Strategy: "direct",
			ControlBehavior: "reject", WarmUpPeriodSec: 10, ColdFactor: 3, MaxQueueingTimeMs: 500, StatIntervalMs: 1000,
			ClusterConfig: config.ClusterConfig{ThresholdType: "global", FallbackToLocalWhenFail: ptr(true)}, Line: 8}},
		ParamRules: []config.ParamRule{{Resource: "/api/{id}", Param: config.Key{{Kind: config.SourceIP}}, Grade: "qps", Count: 1,
			DurationSec: 1, ControlBehavior: "reject", MaxTrackedValues: 100000, Window: "rolling", Timezone: "UTC", CountOn: "request",
			ClusterConfig: config.ClusterConfig{ThresholdType: "global", FallbackToLocalWhenFail: ptr(true)}, Line: 11}},
		DegradeRules: []config.DegradeRule{{Resource: "/api/{id}", Strategy: "errorRatio", Threshold: 0.5, StatIntervalMs: 1000,
			MinRequestAmount: 5, RetryTimeoutMs: 5000, ErrorStatuses: []string{"5xx"}, ProbeNum: 1, Line: 15}},
		Cluster:       config.Cluster{Namespace: "sluice", Timeout: config.Duration(config.DefaultClusterTimeout)},
		BlockResponse: defaultBlock,
		Path:          "testdata/minimal.yaml",
	}
	if !reflect.DeepEqual(cfg, want) {
		g, _ := json.MarshalIndent(cfg, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("Load:\n got %s\nwant %s", g, w)
	}
	if !cfg.FlowRules[0].ClusterConfig.Fallback() || !cfg.BlockResponse.Headers() {
		t.Error("fallbackToLocalWhenFail and rateLimitHeaders must default to true")
	}
}

func TestAdminListen(t *testing.T) {
	base := "upstreams: {app: {targets: [\"http://a\"]}}\nroutes: [{path: /, upstream: app}]\n"
	tests := []struct{ yaml, want string }{
		{"", config.DefaultAdminListen},
		{"admin: {token: x}\n", config.DefaultAdminListen},
		{"admin: {listen: \"\"}\n", ""},
		{"admin: {listen: \":7000\"}\n", ":7000"},
	}
	for _, tt := range tests {
		cfg, err := config.Parse("r.yaml", []byte(base+tt.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tt.yaml, err)
		}
		if got := cfg.AdminListen(); got != tt.want {
			t.Errorf("%q: AdminListen() = %q, want %q", tt.yaml, got, tt.want)
		}
	}
	if got := (&config.Config{}).AdminListen(); got != config.DefaultAdminListen {
		t.Errorf("zero Config: AdminListen() = %q", got)
	}
}

// TestMergeKeys: YAML anchors and merge keys work; explicit keys win.
func TestMergeKeys(t *testing.T) {
	cfg, err := config.Load("testdata/merge_keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Routes[1]; r.Path != "/api2" || r.Upstream != "app" || r.Resource != "/api2" {
		t.Errorf("merged route = %+v", r)
	}
	if r := cfg.FlowRules[1]; r.Resource != "/api2" || r.Count != 10 {
		t.Errorf("merged rule = %+v", r)
	}
}

func TestParseSource(t *testing.T) {
	tests := []struct {
		in      string
		want    config.Source
		str     string
		wantErr string
	}{
		{"header:x-origin", config.Source{Kind: config.SourceHeader, Name: "X-Origin"}, "header:X-Origin", ""},
		{"query:id", config.Source{Kind: config.SourceQuery, Name: "id"}, "query:id", ""},
		// ?first+name=x: a space inside a query name is one a request can send.
		{"query:first name", config.Source{Kind: config.SourceQuery, Name: "first name"}, "query:first name", ""},
		{"query: id", config.Source{}, "", `config: invalid source "query: id": query name " id" must not start or end with a space, nor hold a tab, "=", "&" or "#" (query:id reads ?id=1) (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`},
		{"path:orderId", config.Source{Kind: config.SourcePath, Name: "orderId"}, "path:orderId", ""},
		{"cookie:sid", config.Source{Kind: config.SourceCookie, Name: "sid"}, "cookie:sid", ""},
		{"host", config.Source{Kind: config.SourceHost}, "host", ""},
		{"ip", config.Source{Kind: config.SourceIP}, "ip", ""},
		{"", config.Source{}, "", `config: invalid source "": empty (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`},
		{"header:", config.Source{}, "", `config: invalid source "header:": missing name after "header:" (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`},
		{"header:a b", config.Source{}, "", `config: invalid source "header:a b": header name "a b" has characters not allowed in an HTTP token (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`},
		{"header:host", config.Source{}, "", `config: invalid source "header:host": the Host header is read by the "host" source, not "header:Host" (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`},
		{"host:x", config.Source{}, "", `config: invalid source "host:x": host takes no name (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`},
		{"path:{id}", config.Source{}, "", `config: invalid source "path:{id}": path parameter name "{id}" must not contain { } : / or * (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`},
		{"Header:X", config.Source{}, "", `config: invalid source "Header:X": unknown kind "Header" (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`},
	}
	for _, tt := range tests {
		got, err := config.ParseSource(tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("ParseSource(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.str {
			t.Errorf("ParseSource(%q) = %+v (%q), %v; want %+v (%q)", tt.in, got, got.String(), err, tt.want, tt.str)
		}
	}
}

func TestSourceAndDurationMarshalling(t *testing.T) {
	type doc struct {
		From    config.Source   `yaml:"from" json:"from"`
		Timeout config.Duration `yaml:"timeout" json:"timeout"`
	}
	in := doc{From: config.Source{Kind: config.SourceHeader, Name: "X-Origin"}, Timeout: config.Duration(1500 * time.Millisecond)}

	j, err := json.Marshal(in)
	if err != nil || string(j) != `{"from":"header:X-Origin","timeout":"1.5s"}` {
		t.Fatalf("json.Marshal = %s, %v", j, err)
	}
	var fromJSON doc
	if err := json.Unmarshal(j, &fromJSON); err != nil || fromJSON != in {
		t.Errorf("json round trip = %+v, %v", fromJSON, err)
	}
	y, err := yaml.Marshal(in)
	if err != nil || string(y) != "from: header:X-Origin\ntimeout: 1.5s\n" {
		t.Fatalf("yaml.Marshal = %q, %v", y, err)
	}
	var fromYAML doc
	if err := yaml.Unmarshal(y, &fromYAML); err != nil || fromYAML != in {
		t.Errorf("yaml round trip = %+v, %v", fromYAML, err)
	}

	bad := []struct{ json, want string }{
		{`{"from":"bogus"}`, `config: invalid source "bogus": unknown kind "bogus" (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`},
		{`{"timeout":"30"}`, `config: expected a duration like "30s" or "500ms", got "30"`},
		{`{"timeout":30}`, `config: a duration must be a JSON string like "30s"`},
	}
	for _, b := range bad {
		var d doc
		if err := json.Unmarshal([]byte(b.json), &d); err == nil || err.Error() != b.want {
			t.Errorf("json.Unmarshal(%s) error = %v, want %q", b.json, err, b.want)
		}
	}
	var zero doc
	if err := json.Unmarshal([]byte(`{"from":""}`), &zero); err != nil || !zero.From.IsZero() {
		t.Errorf(`"" source = %+v, %v; want the zero Source`, zero.From, err)
	}
}

func TestBodyTemplate(t *testing.T) {
	cfg, err := config.Load("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body, err := cfg.BlockResponse.BlockBody()
	if err != nil {
		t.Fatal(err)
	}
	b, err := body.Render(config.BlockData{Resource: "r", Reason: "flow"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `{"error":"blocked","resource":"r","reason":"flow"}` {
		t.Errorf("body = %s", got)
	}
}

// A block body renders the bytes text/template writes, whether it takes
// the joined-parts path (text, {{.Resource}}, {{.Reason}}) or not.
func TestBlockBodyRendersAsTextTemplate(t *testing.T) {
	data := []config.BlockData{{Resource: "r", Reason: "flow"}, {Resource: "/orders/{id} é <&>", Reason: ""}, {}}
	for _, body := range []string{
		config.DefaultBlockBody,
		"",
		"plain text, no actions",
		"{{.Reason}}{{.Resource}}",
		"{{ .Resource }} and {{- .Reason -}} trimmed\n",
		"{{/* a comment */}}{{.Resource}}",
		`{{if eq .Reason "flow"}}slow down{{else}}{{.Reason}}{{end}}`,
		"{{printf \"%q\" .Resource}}",
		"{{.Resource | len}}",
		"{{$r := .Resource}}{{$r}}",
	} {
		want, err := template.New("body").Parse(body)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		got, err := config.BlockResponse{Body: body}.BlockBody()
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		for _, d := range data {
			var buf bytes.Buffer
			werr := want.Execute(&buf, d)
			b, gerr := got.Render(d)
			if (werr != nil) != (gerr != nil) || string(b) != buf.String() {
				t.Errorf("%q with %+v: rendered %q (%v), text/template %q (%v)", body, d, b, gerr, buf.String(), werr)
			}
		}
	}
}

// prioritized reads as true, false or "SOURCE=VALUE", from YAML and JSON,
// and writes back as it was written.
func TestPriorityForms(t *testing.T) {
	type doc struct {
		P config.Priority `yaml:"p" json:"p"`
	}
	cases := []struct {
		yaml, json string
		want       config.Priority
	}{
		{"p: true\n", `{"p":true}`, config.Priority{All: true}},
		{"p: false\n", `{"p":false}`, config.Priority{}},
		{"p: header:X-Priority=high\n", `{"p":"header:X-Priority=high"}`,
			config.Priority{Source: config.Source{Kind: config.SourceHeader, Name: "X-Priority"}, Value: "high"}},
		{"p: query:tier=a=b\n", `{"p":"query:tier=a=b"}`,
			config.Priority{Source: config.Source{Kind: config.SourceQuery, Name: "tier"}, Value: "a=b"}},
	}
	for _, c := range cases {
		var y, j doc
		if err := yaml.Unmarshal([]byte(c.yaml), &y); err != nil || y.P != c.want {
			t.Errorf("yaml %q = %+v, %v; want %+v", c.yaml, y.P, err, c.want)
		}
		if err := json.Unmarshal([]byte(c.json), &j); err != nil || j.P != c.want {
			t.Errorf("json %s = %+v, %v; want %+v", c.json, j.P, err, c.want)
		}
		if out, _ := yaml.Marshal(y); string(out) != c.yaml {
			t.Errorf("yaml.Marshal = %q, want %q", out, c.yaml)
		}
		if out, _ := json.Marshal(j); string(out) != c.json {
			t.Errorf("json.Marshal = %s, want %s", out, c.json)
		}
	}
	var d doc
	if err := json.Unmarshal([]byte(`{"p":"ip"}`), &d); err == nil {
		t.Error(`"ip" without =VALUE was accepted`)
	}
}

// TestJSONBlockBodyEscapesItsValues: a JSON block body (the default one)
// stays valid JSON whatever the resource is called. A resource is its
// route's path pattern unless named, and a regex pattern's backslash made
// the default body invalid JSON ("Invalid \escape"); so did a quote in a
// name. Other content types get the values as they are.
func TestJSONBlockBodyEscapesItsValues(t *testing.T) {
	resources := []string{`/o/{id:\d+}`, `say "hi"`, "tab\there\x01", "/plain/é"}
	for _, ct := range []string{"application/json", "application/problem+json", "application/json; charset=utf-8"} {
		body, err := config.BlockResponse{Body: config.DefaultBlockBody, ContentType: ct}.BlockBody()
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range resources {
			b, err := body.Render(config.BlockData{Resource: res, Reason: "flow"})
			if err != nil {
				t.Fatal(err)
			}
			var got struct{ Resource, Reason string }
			if err := json.Unmarshal(b, &got); err != nil || got.Resource != res || got.Reason != "flow" {
				t.Errorf("%s body for %q: %s: read back %+v, %v", ct, res, b, got, err)
			}
		}
	}
	for _, tmpl := range []string{`{"r":"{{.Resource}}"}`, `{{if .Resource}}{"r":"{{.Resource}}"}{{end}}`} {
		body, err := config.BlockResponse{Body: tmpl, ContentType: "application/json"}.BlockBody()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := body.Render(config.BlockData{Resource: `a\b"c`})
		if !json.Valid(b) {
			t.Errorf("template %s renders invalid JSON: %s", tmpl, b)
		}
	}
	body, err := config.BlockResponse{Body: "{{.Resource}}", ContentType: "text/plain"}.BlockBody()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := body.Render(config.BlockData{Resource: `/o/{id:\d+}`}); string(b) != `/o/{id:\d+}` {
		t.Errorf("text/plain body = %s, want the resource as it is", b)
	}
}
