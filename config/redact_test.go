package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestClusterJSONHidesRedisPassword(t *testing.T) {
	b, err := json.Marshal(Cluster{RedisTarget: RedisTarget{Redis: "redis://user:s3cret@127.0.0.1:6379/0"}, Namespace: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "127.0.0.1:6379") {
		t.Errorf("cluster JSON = %s: the password must be hidden, the address kept", b)
	}
}

func TestRedisRedacted(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://user:s3cret@127.0.0.1:6379/0", "redis://user:xxxxx@127.0.0.1:6379/0"},
		{"redis://:s3cret@127.0.0.1:6379", "redis://:xxxxx@127.0.0.1:6379"},
		{"redis://user@127.0.0.1", "redis://user@127.0.0.1"},
		// url.Parse refuses a bad port: the password is masked all the same.
		{"redis://user:s3cret@127.0.0.1:port/0", "redis://user:xxxxx@127.0.0.1:port/0"},
		{"redis://user:s3c@ret@h:x", "redis://user:xxxxx@h:x"},
		// go-redis reads a password from the query too; config refuses a
		// query, and its message quotes the URL.
		{"redis://127.0.0.1:6379/0?password=s3cret", "redis://127.0.0.1:6379/0?password=xxxxx"},
		{"redis://h:1/0?db=1&password=s3cret#s3cret", "redis://h:1/0?db=1&password=xxxxx#xxxxx"},
		{"redis://h:port/0?password=s3cret", "redis://h:port/0?password=xxxxx"},
		// A Sentinel address with a userinfo (config refuses it): no URL.
		{"user:s3cret@127.0.0.1:26379", "user:xxxxx@127.0.0.1:26379"},
		{"s3cret@127.0.0.1:26379", "xxxxx@127.0.0.1:26379"},
		{"127.0.0.1:26379", "127.0.0.1:26379"},
		// A "?" in the password is no query (url.Parse refuses the URL).
		{"redis://user:pa?ss@host:6379", "redis://user:xxxxx@host:6379"},
		{"user:pa?ss@h:1", "user:xxxxx@h:1"},
	}
	for _, tt := range tests {
		if got := (Cluster{RedisTarget: RedisTarget{Redis: tt.in}}).Redacted().Redis; got != tt.want {
			t.Errorf("Redacted().Redis of %q = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// secretValue is what TestSecretsMasked writes in each secret's place.
func secretValue(s Secret) string {
	if s.URL {
		return "redis://u:hunter2@10.0.0.1:6379/0"
	}
	return "hunter2"
}

// TestSecretsMasked: every secret in Secrets is masked in the copy that logs
// and warnings show (Redacted) and in the rules served as JSON, and the
// original keeps it. admin's and main's tests walk the same list.
func TestSecretsMasked(t *testing.T) {
	for _, s := range Secrets() {
		t.Run(s.Path, func(t *testing.T) {
			var c Config
			if err := yaml.Unmarshal([]byte(s.Document(secretValue(s))), &c); err != nil {
				t.Fatalf("%s: %v", s.Document(secretValue(s)), err)
			}
			if !strings.Contains(allStrings(reflect.ValueOf(c)), "hunter2") {
				t.Fatalf("the document did not set the secret:\n%s", s.Document(secretValue(s)))
			}
			r := c.Redacted()
			if got := allStrings(reflect.ValueOf(*r)); strings.Contains(got, "hunter2") || !strings.Contains(got, Mask) {
				t.Errorf("Redacted() shows %q", got)
			}
			if !strings.Contains(allStrings(reflect.ValueOf(c)), "hunter2") {
				t.Error("Redacted() changed the original")
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "hunter2") {
				t.Errorf("JSON shows the secret: %s", b)
			}
		})
	}
}

// allStrings is every string value in v, joined.
func allStrings(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return v.String() + "\n"
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return allStrings(v.Elem())
	case reflect.Slice, reflect.Array:
		var b strings.Builder
		for i := range v.Len() {
			b.WriteString(allStrings(v.Index(i)))
		}
		return b.String()
	case reflect.Map:
		var b strings.Builder
		for it := v.MapRange(); it.Next(); {
			b.WriteString(allStrings(it.Key()) + allStrings(it.Value()))
		}
		return b.String()
	case reflect.Struct:
		var b strings.Builder
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				b.WriteString(allStrings(v.Field(i)))
			}
		}
		return b.String()
	}
	return ""
}

// TestErrorsMaskOnlySecretQueryValues: a message quoting a Redis URL with
// a query masks the values of its secrets' names (password=) and no other
// value: every query value was taken for a secret, and "true" and "sluice"
// were masked in every message of the file.
func TestErrorsMaskOnlySecretQueryValues(t *testing.T) {
	_, err := Parse("rules.yaml", []byte("cluster:\n  redis: redis://h:6379/0?pool_fifo=true&client_name=sluice&password=hunter22\n"))
	if err == nil || strings.Contains(err.Error(), "hunter22") || !strings.Contains(err.Error(), "pool_fifo=true&client_name=sluice") {
		t.Errorf("%v: want the password masked and the other options shown", err)
	}
}

// TestErrorsHideRedisPasswords: a Redis URL written where a list or a
// section belongs is quoted in the error (which the log, the admin API's
// lastError and the editor's 422 repeat) without its password.
func TestErrorsHideRedisPasswords(t *testing.T) {
	for _, doc := range []string{
		"cluster:\n  clusterAddrs: \"redis://:hunter2@127.0.0.1:7000\"\n",
		"rulesSource:\n  clusterAddrs: \"redis://u:hunter2@127.0.0.1:7000\"\n",
		"cluster: \"redis://:hunter2@127.0.0.1:6379/0\"\n",
		"cluster:\n  sentinel: \"redis://:hunter2@127.0.0.1:26379\"\n",
		"cluster:\n  redis: redis://127.0.0.1:6379/0?password=hunter2\n",
		"rulesSource:\n  redis: redis://127.0.0.1:6379/0?db=0&password=hunter2\n",
		"cluster:\n  sentinel:\n    masterName: m\n    addrs: [\"u:hunter2@127.0.0.1:26379\"]\n",
	} {
		_, err := Parse("rules.yaml", []byte(doc))
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), Mask) {
			t.Errorf("%q: %v, want an error with the password masked", doc, err)
		}
	}
}

// TestSecretsMaskedInErrors: a message that quotes a value quotes a
// secret too when the file puts the secret where it does not belong (by an
// anchor: count: *token), and GET /api/rules and the log show every
// message. Each secret is masked there, long ones cut at 60 bytes
// included, and a problem with an aliased value is told at the line of the
// field that holds it, not at its anchor's.
func TestSecretsMaskedInErrors(t *testing.T) {
	const routes = "upstreams:\n  up: { targets: [\"http://127.0.0.1:1\"] }\nroutes:\n  - { path: /a, upstream: up, resource: a }\n"
	long := strings.Repeat("hunter2-", 10) // 80 bytes: quoted cut at 60
	type tc struct {
		name, file string
		want       string // one message, exactly
	}
	cases := []tc{
		{"an anchored token in a number", "admin:\n  token: &t \"hunter2-token\"\n" + routes +
			"flowRules:\n  - resource: a\n    count: *t\n",
			"x.yaml:9: flowRules[0].count: expected a number, got \"xxxxx\""},
		{"a long token in a name", "admin:\n  token: &t " + long + "\n" + routes +
			"flowRules:\n  - resource: *t\n    count: 1\n",
			"x.yaml:8: flowRules[0].resource: unknown resource \"xxxxx…\": no route has it (resources: a)"},
	}
	for _, s := range Secrets() {
		pw := "hunter2-" + strings.ReplaceAll(s.Path, ".", "-")
		v := pw
		if s.URL {
			v = "redis://u:" + pw + "@10.0.0.1:6379/0"
		}
		// log is a gateway's own section, with or without a rulesSource.
		cases = append(cases, tc{name: s.Path, file: s.Document(v) + "log:\n  level: " + pw + "\n"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(c.file))
			if err == nil {
				t.Fatalf("loaded:\n%s", c.file)
			}
			msg := err.Error()
			if strings.Contains(msg, "hunter2") || !strings.Contains(msg, Mask) {
				t.Errorf("the errors show the secret (or mask nothing):\n%s\nof:\n%s", msg, c.file)
			}
			if c.want != "" && msg != c.want {
				t.Errorf("errors\n%s\nwant\n%s", msg, c.want)
			}
		})
	}
}
