package lifecycle

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/proxy"
)

// TestTrafficServersTakeServerSection: the traffic listeners' servers use
// the server section, and -read-header-timeout wins over the file's.
func TestTrafficServersTakeServerSection(t *testing.T) {
	cfg := rulesWith(t, "listen: \"127.0.0.1:0\"\nhttp2: {h2c: true}\n"+
		"server: {readHeaderTimeout: 3s, idleTimeout: 45s, sendTimeout: 2s, maxConcurrentStreams: 7}")
	for _, tt := range []struct {
		name       string
		opts       Options
		readHeader time.Duration
	}{
		{"from the file", Options{}, 3 * time.Second},
		{"-read-header-timeout overrides it", Options{ReadHeaderTimeout: time.Second}, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gw := proxy.New(proxy.Deps{Log: zerolog.Nop()})
			tr, err := listenTraffic(cfg, cfg.Listen, gw, tt.opts, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			defer tr.close()
			srv := tr.servers[0]
			if srv.ReadHeaderTimeout != tt.readHeader || srv.IdleTimeout != 45*time.Second ||
				srv.HTTP2 == nil || srv.HTTP2.MaxConcurrentStreams != 7 {
				t.Errorf("readHeaderTimeout %v, idleTimeout %v, http2 %+v; want %v, 45s, 7 streams",
					srv.ReadHeaderTimeout, srv.IdleTimeout, srv.HTTP2, tt.readHeader)
			}
		})
	}
}
