package lifecycle

import (
	"fmt"
	"net"

	"golang.org/x/net/netutil"

	"sluice/config"
)

// listeners are the sockets the gateway serves on, opened before anything
// is served so that a taken port stops the start.
type listeners struct {
	traffic *traffic     // listen and tls.listen, with their servers
	admin   net.Listener // nil: the admin listener is off
}

// adminMaxConnections caps the admin listener's connections: an admin
// listener opened to a Prometheus elsewhere (0.0.0.0:9090) is open to
// whoever reaches it, and its connections take descriptors from the ones
// the traffic's upstream connections need. Past it, a connection waits in
// the kernel's queue until one closes (readHeaderTimeout and idleTimeout
// bound how long each is held); scrapes, the dashboard and the CLI use a
// handful.
const adminMaxConnections = 256

// listen opens the traffic listeners (plain and TLS, see listenTraffic) and,
// unless it is off, the admin listener; on error it closes what it opened.
func listen(o Options, cfg *config.Config, inst *Instance) (listeners, error) {
	tr, err := listenTraffic(cfg, inst.proxy, inst.log, inst.tlsMetrics)
	if err != nil {
		return listeners{}, err
	}
	lns := listeners{traffic: tr}
	if addr := cfg.AdminListen(); addr != "" {
		if lns.admin, err = net.Listen("tcp", addr); err != nil {
			tr.close()
			return listeners{}, fmt.Errorf("admin listen %s: %w", addr, err)
		}
		lns.admin = netutil.LimitListener(lns.admin, adminMaxConnections)
	}
	return lns, nil
}

// overrides are the command line's -listen, -admin, -log-level,
// -log-format and -read-header-timeout as config applies them: the one
// place the flags replace the file's settings, at start, at every reload
// and in the editor's check, so that the file's replaced values are never
// checked, used or shown (GET /api/rules). cfg.Listen and
// cfg.AdminListen() are then the addresses in force.
func (o Options) overrides() config.Overrides {
	return config.Overrides{Listen: address(o.Listen), AdminListen: address(o.Admin), LogLevel: o.LogLevel, LogFormat: o.LogFormat, ReadHeaderTimeout: o.ReadHeaderTimeout}
}

// address is a listener flag's override: nil for "" (the file's), "" for
// "off" (no listener), else the address.
func address(flag string) *string {
	switch flag {
	case "":
		return nil
	case "off":
		return new(string)
	}
	return &flag
}
