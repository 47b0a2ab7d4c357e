package redisconn_test

import (
	"strconv"
	"testing"

	"sluice/internal/redisconn"
	"sluice/internal/redistest"
)

// TestSlotAgreesWithRedis: Slot computes what a Redis Cluster's CLUSTER
// KEYSLOT answers, hash tags included.
func TestSlotAgreesWithRedis(t *testing.T) {
	cl := redistest.StartSingleShardCluster(t, 0)
	keys := []string{"", "a", "foo", "123456789", "{user1000}.following", "{user1000}.followers",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{sluice:w:5f3a}:", "{sluice:w:5f3a}:origin-7", "{", "}{x}", "{}x"}
	for _, k := range keys {
		r, err := cl.Nodes[0].Do("CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatal(err)
		}
		if got := redisconn.Slot(k); r != strconv.Itoa(got) {
			t.Errorf("Slot(%q) = %d, Redis says %v", k, got, r)
		}
	}
	// The CRC16 check value of the XMODEM variant Redis uses.
	if got := redisconn.Slot("123456789"); got != 0x31C3%redisconn.Slots {
		t.Errorf("Slot(123456789) = %d, want %d", got, 0x31C3%redisconn.Slots)
	}
}
