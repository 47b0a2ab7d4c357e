package config_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sluice/config"
)

// TestRedisFormsDecode: each form, written at cluster's level, decodes into
// the cluster's RedisTarget and is the form reported.
func TestRedisFormsDecode(t *testing.T) {
	base := `upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
routes: [{path: /api, upstream: app}]
flowRules: [{resource: /api, count: 10, clusterMode: true}]
cluster:
`
	tests := []struct {
		name, yaml string
		want       config.RedisTarget
		form, desc string
	}{
		{"url", "  redis: rediss://sluice:hunter2@10.0.0.1:6380/2\n",
			config.RedisTarget{Redis: "rediss://sluice:hunter2@10.0.0.1:6380/2"},
			config.RedisFormSingle, "rediss://sluice:xxxxx@10.0.0.1:6380/2"},
		{"sentinel", "  sentinel: {masterName: mymaster, addrs: [\"10.0.0.1:26379\", \"10.0.0.2:26379\"], password: hunter2}\n",
			config.RedisTarget{Sentinel: &config.Sentinel{MasterName: "mymaster", Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, Password: "hunter2"}},
			config.RedisFormSentinel, "sentinel mymaster at 10.0.0.1:26379,10.0.0.2:26379"},
		{"cluster", "  clusterAddrs: [\"redis://u:hunter2@10.0.0.1:7000\", \"redis://u:hunter2@10.0.0.2:7000\"]\n",
			config.RedisTarget{ClusterAddrs: []string{"redis://u:hunter2@10.0.0.1:7000", "redis://u:hunter2@10.0.0.2:7000"}},
			config.RedisFormCluster, "cluster at redis://u:xxxxx@10.0.0.1:7000,redis://u:xxxxx@10.0.0.2:7000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("rules.yaml", []byte(base+tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Cluster.RedisTarget
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decoded %+v, want %+v", got, tt.want)
			}
			if got.Form() != tt.form || got.String() != tt.desc {
				t.Errorf("Form() = %q, String() = %q; want %q, %q", got.Form(), got.String(), tt.form, tt.desc)
			}
			if cfg.Cluster.Namespace != config.DefaultClusterNamespace {
				t.Errorf("namespace = %q, want the default", cfg.Cluster.Namespace)
			}
		})
	}
}

// TestRedisFormsOK: a fixture using every Sentinel setting loads as written.
func TestRedisFormsOK(t *testing.T) {
	cfg, err := config.Load(filepath.Join("testdata", "redis_forms_ok.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Sentinel{MasterName: "mymaster", Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379", "[::1]:26379"},
		Username: "sluice", Password: "hunter2", SentinelPassword: "s3ntinel", DB: 2, TLS: true}
	if got := cfg.Cluster.Sentinel; !reflect.DeepEqual(got, want) {
		t.Errorf("sentinel = %+v, want %+v", got, want)
	}
}

// TestClusterJSONHidesEveryPassword: /api/rules serves the cluster section
// as JSON: it shows the form and the addresses, never a password.
func TestClusterJSONHidesEveryPassword(t *testing.T) {
	tests := []config.RedisTarget{
		{Redis: "redis://u:hunter2@10.0.0.1:6379/0"},
		{Sentinel: &config.Sentinel{MasterName: "m", Addrs: []string{"10.0.0.1:26379"}, Password: "hunter2", SentinelPassword: "hunter2"}},
		{ClusterAddrs: []string{"rediss://u:hunter2@10.0.0.1:7000", "rediss://u:hunter2@10.0.0.2:7000"}},
	}
	for _, tt := range tests {
		orig := tt.Redacted() // Redacted must not write through to the original
		b, err := json.Marshal(config.Cluster{RedisTarget: tt, Namespace: "n"})
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.Contains(s, "hunter2") || !strings.Contains(s, "10.0.0.1:") || !strings.Contains(s, `"namespace":"n"`) {
			t.Errorf("cluster JSON = %s: passwords must be hidden, addresses and namespace kept", s)
		}
		if tt.Sentinel != nil && (tt.Sentinel.Password != "hunter2" || orig.Sentinel == tt.Sentinel) {
			t.Errorf("Redacted changed the original or shares its Sentinel")
		}
		if strings.Contains(tt.String(), "hunter2") {
			t.Errorf("String() = %q shows a password", tt.String())
		}
	}
}
