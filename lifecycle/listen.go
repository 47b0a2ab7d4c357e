package lifecycle

import (
	"fmt"
	"net"

	"sluice/config"
)

// listeners are the sockets the gateway serves on, opened before anything
// is served so that a taken port stops the start.
type listeners struct {
	traffic *traffic     // listen and tls.listen, with their servers
	admin   net.Listener // nil: the admin listener is off
}

// listen opens the traffic listeners (plain and TLS, see listenTraffic) and,
// unless it is off, the admin listener; on error it closes what it opened.
func listen(o Options, cfg *config.Config, inst *Instance) (listeners, error) {
	tr, err := listenTraffic(cfg, o.trafficAddr(cfg), inst.proxy, o, inst.log)
	if err != nil {
		return listeners{}, err
	}
	lns := listeners{traffic: tr}
	if addr := o.adminAddr(cfg); addr != "" {
		if lns.admin, err = net.Listen("tcp", addr); err != nil {
			tr.close()
			return listeners{}, fmt.Errorf("admin listen %s: %w", addr, err)
		}
	}
	return lns, nil
}

// trafficAddr is where traffic is served: -listen, else the file's listen.
func (o Options) trafficAddr(cfg *config.Config) string {
	if o.Listen != "" {
		return o.Listen
	}
	return cfg.Listen
}

// adminAddr is where the admin API is served: -admin ("off": nowhere),
// else the file's admin.listen; "" means off.
func (o Options) adminAddr(cfg *config.Config) string {
	switch o.Admin {
	case "":
		return cfg.AdminListen()
	case "off":
		return ""
	}
	return o.Admin
}
