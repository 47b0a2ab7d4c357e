package proxy

import "testing"

func TestAutoMaxConnections(t *testing.T) {
	for _, tt := range []struct {
		limit uint64
		want  int
	}{
		{0, 0},            // unknown: no cap
		{1 << 40, 0},      // unlimited in effect
		{20000, 9936},     // this machine's: (20000 - 128) / 2
		{1024, 448},       // a common default
		{1 << 20, 524224}, // systemd's hard limit
		{200, 50},         // too low for the reserve: a quarter
	} {
		if got := autoMaxConnectionsOf(tt.limit); got != tt.want {
			t.Errorf("open-file limit %d: automatic maxConnections %d, want %d", tt.limit, got, tt.want)
		}
	}
}
