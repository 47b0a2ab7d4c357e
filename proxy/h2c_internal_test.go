package proxy

import (
	"net/http"
	"testing"
)

// dropH2CUpgrade reads the Upgrade field as the token list keepUpgrades
// and webSocketAccepted read: an upgrade to h2c goes, with HTTP2-Settings
// and its Connection tokens; a token that merely holds "h2c" is no upgrade
// to it, and the request's other upgrade stays.
func TestDropH2CUpgradeReadsTokens(t *testing.T) {
	for _, c := range []struct {
		upgrade, wantUpgrade, wantSettings string
	}{
		{"h2c", "", ""},
		{"H2C", "", ""},
		{"websocket, h2c", "", ""},
		{"not-h2c, websocket", "not-h2c, websocket", "AAMA"}, // a substring read dropped the WebSocket
		{"websocket", "websocket", "AAMA"},
	} {
		r, _ := http.NewRequest("GET", "http://gw/ws", nil)
		r.Header.Set("Upgrade", c.upgrade)
		r.Header.Set("Connection", "Upgrade, HTTP2-Settings")
		r.Header.Set("HTTP2-Settings", "AAMA")
		dropH2CUpgrade(r)
		if got, s := r.Header.Get("Upgrade"), r.Header.Get("HTTP2-Settings"); got != c.wantUpgrade || s != c.wantSettings {
			t.Errorf("Upgrade %q: left Upgrade %q, HTTP2-Settings %q; want %q, %q", c.upgrade, got, s, c.wantUpgrade, c.wantSettings)
		}
	}
}
