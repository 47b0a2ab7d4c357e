package config

import (
	"encoding/json"
	"strings"
	"testing"
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
	}
	for _, tt := range tests {
		if got := (Cluster{RedisTarget: RedisTarget{Redis: tt.in}}).RedisRedacted(); got != tt.want {
			t.Errorf("RedisRedacted(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
