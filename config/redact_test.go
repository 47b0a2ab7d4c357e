package config

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestClusterJSONHidesRedisPassword(t *testing.T) {
	b, err := json.Marshal(Cluster{Redis: "redis://user:s3cret@127.0.0.1:6379/0", Namespace: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "127.0.0.1:6379") {
		t.Errorf("cluster JSON = %s: the password must be hidden, the address kept", b)
	}
}
