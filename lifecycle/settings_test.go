package lifecycle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"sluice/config"
)

// rulesWith parses a minimal rules file with extra settings.
func rulesWith(t *testing.T, extra string) *config.Config {
	t.Helper()
	return rulesAs(t, Options{}, extra)
}

// rulesAs is rulesWith read as a gateway started with o reads it: the
// flags replace the file's settings (Options.overrides).
func rulesAs(t *testing.T, o Options, extra string) *config.Config {
	t.Helper()
	cfg, err := o.overrides().Parse("rules.yaml", []byte(extra+"\nupstreams: {app: {targets: [\"http://127.0.0.1:9001\"]}}\nroutes: [{path: /a, upstream: app}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// logged is one log event: its message and string fields.
type logged map[string]any

func events(t *testing.T, buf *bytes.Buffer) []logged {
	t.Helper()
	var out []logged
	sc := bufio.NewScanner(buf)
	for sc.Scan() {
		var ev logged
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		delete(ev, "time")
		out = append(out, ev)
	}
	return out
}

func TestAnnounceSettings(t *testing.T) {
	const startFile = `listen: ":8080"
admin: {listen: "127.0.0.1:9090", token: t-One}
log: {level: info}
http2: {h2c: false}
server: {readHeaderTimeout: 10s, idleTimeout: 120s, sendTimeout: 30s, maxConcurrentStreams: 100}
cluster: {redis: "redis://u:pw-One@127.0.0.1:6379/0", namespace: a}`
	changed := strings.NewReplacer(`":8080"`, `":8081"`, `"127.0.0.1:9090"`, `"127.0.0.1:9091"`, "level: info", "level: debug",
		"h2c: false", "h2c: true", "127.0.0.1:6379/0", "127.0.0.2:6379/0", "namespace: a", "namespace: b",
		"readHeaderTimeout: 10s", "readHeaderTimeout: 5s", "idleTimeout: 120s", "idleTimeout: 1m",
		"maxConcurrentStreams: 100", "maxConcurrentStreams: 3").Replace(startFile)
	warn := func(setting, old, new string) logged {
		return logged{"level": "warn", "setting": setting, "old": old, "new": new,
			"message": setting + " changed in the rules file: it takes effect at restart"}
	}
	tests := []struct {
		name                string
		opts                Options
		started, prev, next string
		want                []logged
		token               string // the token put in force
		hosts               string // the admin.hosts put in force, joined by ","
	}{
		{name: "nothing changed", started: startFile, prev: startFile, next: startFile, token: "t-One"},
		{name: "every start-only setting changed", started: startFile, prev: startFile, next: changed, token: "t-One",
			want: []logged{
				warn("listen", ":8080", ":8081"),
				warn("admin.listen", "127.0.0.1:9090", "127.0.0.1:9091"),
				warn("log.level", "info", "debug"),
				warn("http2.h2c", "false", "true"),
				warn("server.readHeaderTimeout", "10s", "5s"),
				warn("server.idleTimeout", "2m0s", "1m0s"),
				warn("server.maxConcurrentStreams", "100", "3"),
				warn("cluster.redis", "redis://u:xxxxx@127.0.0.1:6379/0", "redis://u:xxxxx@127.0.0.2:6379/0"),
				warn("cluster.namespace", "a", "b"),
			}},
		{name: "flags fix listen, admin.listen, log.level and server.readHeaderTimeout",
			opts:    Options{Listen: ":1", Admin: ":2", LogLevel: "warn", ReadHeaderTimeout: time.Second},
			started: startFile, prev: startFile, next: changed, token: "t-One",
			want: []logged{
				warn("http2.h2c", "false", "true"),
				warn("server.idleTimeout", "2m0s", "1m0s"),
				warn("server.maxConcurrentStreams", "100", "3"),
				warn("cluster.redis", "redis://u:xxxxx@127.0.0.1:6379/0", "redis://u:xxxxx@127.0.0.2:6379/0"),
				warn("cluster.namespace", "a", "b"),
			}},
		{name: "an unrelated edit after a change does not warn again", started: startFile, prev: changed, next: changed, token: "t-One"},
		{name: "a change back to the value in force does not warn", started: startFile, prev: changed, next: startFile, token: "t-One"},
		{name: "only the Redis password changed", started: startFile, prev: startFile,
			next: strings.Replace(startFile, "pw-One", "pw-Two", 1), token: "t-One",
			want: []logged{warn("cluster.redis", "redis://u:xxxxx@127.0.0.1:6379/0", "redis://u:xxxxx@127.0.0.1:6379/0 (a hidden password changed)")}},
		{name: "the Redis moved under Sentinel", started: startFile, prev: startFile, token: "t-One",
			next: strings.Replace(startFile, `redis: "redis://u:pw-One@127.0.0.1:6379/0"`,
				`sentinel: {masterName: m, addrs: ["10.0.0.1:26379"], password: pw-Two}`, 1),
			want: []logged{
				warn("cluster.redis", "redis://u:xxxxx@127.0.0.1:6379/0", ""),
				warn("cluster.sentinel", "", "masterName=m addrs=10.0.0.1:26379 password=xxxxx"),
			}},
		{name: "a Cluster's seeds changed", started: startFile, prev: startFile, token: "t-One",
			next: strings.Replace(startFile, `redis: "redis://u:pw-One@127.0.0.1:6379/0"`,
				`clusterAddrs: ["redis://u:pw-Two@10.0.0.1:7000", "redis://u:pw-Two@10.0.0.2:7000"]`, 1),
			want: []logged{
				warn("cluster.redis", "redis://u:xxxxx@127.0.0.1:6379/0", ""),
				warn("cluster.clusterAddrs", "", "redis://u:xxxxx@10.0.0.1:7000,redis://u:xxxxx@10.0.0.2:7000"),
			}},
		{name: "tls settings", started: startFile, prev: startFile, token: "t-One",
			next: startFile + "\ntls: {listen: \":8443\", certificates: [{certFile: c.pem, keyFile: k.pem}], minVersion: \"1.3\"}",
			want: []logged{
				warn("tls.listen", "", ":8443"),
				warn("tls.certificates", "", "c.pem+k.pem"),
				warn("tls.minVersion", "", "1.3"),
			}},
		{name: "server.sendTimeout applies to new connections", started: startFile, prev: startFile, token: "t-One",
			next: strings.Replace(startFile, "sendTimeout: 30s", "sendTimeout: 5s", 1),
			want: []logged{{"level": "info", "setting": "server.sendTimeout", "old": "30s", "new": "5s",
				"message": "server.sendTimeout changed: it applies to connections and HTTP/2 streams opened from now on"}}},
		{name: "server.sendTimeout set where it was the default", token: "t-One",
			started: strings.Replace(startFile, " sendTimeout: 30s,", "", 1), prev: strings.Replace(startFile, " sendTimeout: 30s,", "", 1),
			next: strings.Replace(startFile, "sendTimeout: 30s", "sendTimeout: 1m", 1),
			want: []logged{{"level": "info", "setting": "server.sendTimeout", "old": "30s", "new": "1m0s",
				"message": "server.sendTimeout changed: it applies to connections and HTTP/2 streams opened from now on"}}},
		{name: "the connection caps apply to new connections", started: startFile, prev: startFile, token: "t-One",
			next: strings.Replace(startFile, "sendTimeout: 30s", "sendTimeout: 30s, maxConnections: 5000, maxConnectionsPerIP: 50", 1),
			want: []logged{
				{"level": "info", "setting": "server.maxConnections", "old": float64(0), "new": float64(5000),
					"message": "server.maxConnections changed: it applies to connections accepted from now on (0: the default); none open is closed"},
				{"level": "info", "setting": "server.maxConnectionsPerIP", "old": float64(0), "new": float64(50),
					"message": "server.maxConnectionsPerIP changed: it applies to connections accepted from now on (0: the default); none open is closed"},
			}},
		{name: "a rotated token applies", started: startFile, prev: startFile,
			next: strings.Replace(startFile, "t-One", "t-Two", 1), token: "t-Two",
			want: []logged{{"level": "info", "setting": "admin.token", "required": true,
				"message": "admin.token changed: the new token is in force, the old one is refused"}}},
		{name: "a removed token applies", started: startFile, prev: startFile,
			next: strings.Replace(startFile, ", token: t-One", "", 1), token: "",
			want: []logged{{"level": "info", "setting": "admin.token", "required": false,
				"message": "admin.token removed: writes need no token and are accepted only from this machine (a loopback peer)"}}},
		{name: "admin.hosts applies", started: startFile, prev: startFile, token: "t-One",
			next:  strings.Replace(startFile, "token: t-One", "token: t-One, hosts: [Gateway-1.Internal., gw.internal]", 1),
			hosts: "gateway-1.internal,gw.internal",
			want: []logged{{"level": "info", "setting": "admin.hosts", "hosts": []any{"gateway-1.internal", "gw.internal"},
				"message": "admin.hosts changed: the admin listener answers to these names from now on, besides IP addresses and localhost"}}},
		{name: "admin.hosts emptied applies", started: startFile, token: "t-One",
			prev: strings.Replace(startFile, "token: t-One", "token: t-One, hosts: [gw.internal]", 1), next: startFile,
			want: []logged{{"level": "info", "setting": "admin.hosts", "hosts": []any{},
				"message": "admin.hosts changed: the admin listener answers to these names from now on, besides IP addresses and localhost"}}},
		{name: "SLUICE_ADMIN_TOKEN wins over a rotated token", opts: Options{AdminToken: "t-Env"}, started: startFile, prev: startFile,
			next: strings.Replace(startFile, "t-One", "t-Two", 1), token: "t-Env",
			want: []logged{{"level": "warn", "setting": "admin.token",
				"message": "admin.token changed in the rules file, but SLUICE_ADMIN_TOKEN overrides it: the token in force is unchanged"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			var token, hosts []string
			r := &reloader{opts: tt.opts, log: zerolog.New(&buf), clusterOn: true,
				setToken: func(tok string) { token = append(token, tok) },
				setHosts: func(h []string) { hosts = append(hosts, strings.Join(h, ",")) }}
			r.announceSettings(rulesAs(t, tt.opts, tt.started), rulesAs(t, tt.opts, tt.prev), rulesAs(t, tt.opts, tt.next))
			logs := buf.String()
			got := events(t, &buf)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("logged:\n%v\nwant:\n%v", got, tt.want)
			}
			if len(token) != 1 || token[0] != tt.token {
				t.Errorf("tokens put in force: %q, want [%q]", token, tt.token)
			}
			if len(hosts) != 1 || hosts[0] != tt.hosts {
				t.Errorf("admin.hosts put in force: %q, want [%q]", hosts, tt.hosts)
			}
			for _, secret := range []string{"pw-", "t-One", "t-Two", "t-Env"} {
				if strings.Contains(logs, secret) {
					t.Errorf("a secret (%s) was logged: %s", secret, logs)
				}
			}
		})
	}
}

// TestAnnounceSettingsMaskEverySecret: a reload that sets any secret that
// config.Secrets lists logs the changed setting with the secret masked.
func TestAnnounceSettingsMaskEverySecret(t *testing.T) {
	for _, s := range config.Secrets() {
		t.Run(s.Path, func(t *testing.T) {
			value := "hunter2"
			if s.URL {
				value = "redis://u:hunter2@10.0.0.1:6379/0"
			}
			var next config.Config
			if err := yaml.Unmarshal([]byte(s.Document(value)), &next); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			r := &reloader{log: zerolog.New(&buf), clusterOn: true, setToken: func(string) {}}
			r.announceSettings(&config.Config{}, &config.Config{}, &next)
			if strings.Contains(buf.String(), "hunter2") {
				t.Errorf("logged the secret:\n%s", buf.String())
			}
			if buf.Len() == 0 {
				t.Error("nothing logged: the reload did not see the setting change")
			}
		})
	}
}
