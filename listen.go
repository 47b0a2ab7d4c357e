package main

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
func listen(o options, cfg *config.Config, g *gateway) (listeners, error) {
	tr, err := listenTraffic(cfg, o.trafficAddr(cfg), g.proxy, o, g.log)
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
func (o options) trafficAddr(cfg *config.Config) string {
	if o.listen != "" {
		return o.listen
	}
	return cfg.Listen
}

// adminAddr is where the admin API is served: -admin ("off": nowhere),
// else the file's admin.listen; "" means off.
func (o options) adminAddr(cfg *config.Config) string {
	switch o.admin {
	case "":
		return cfg.AdminListen()
	case "off":
		return ""
	}
	return o.admin
}
