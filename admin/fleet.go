package admin

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FleetGateway is one gateway of the fleet, as its last heartbeat said.
type FleetGateway struct {
	ID       string    `json:"id"`
	Listen   string    `json:"listen"`
	Version  int64     `json:"version"` // the rules document version in force there
	PassQps  float64   `json:"passQps"`
	BlockQps float64   `json:"blockQps"`
	LastSeen time.Time `json:"lastSeen"`
}

// SourceState is what a gateway knows of its rules source.
type SourceState struct {
	Name     string     `json:"name"`    // redis://HOST/DB/KEY
	Version  int64      `json:"version"` // the document version in force; 0: none yet
	Up       bool       `json:"up"`      // Redis answered the last call
	LastSeen *time.Time `json:"lastSeen"`
	// Cache is the file that keeps the last good document.
	Cache string `json:"cache"`
	// FromCache is set while the rules in force came from Cache: the
	// gateway started while the source was down or held no valid document,
	// and no version from the source has applied since.
	FromCache bool `json:"fromCache"`
}

// fleetTimeout bounds the Redis read behind one GET /api/fleet.
const fleetTimeout = 2 * time.Second

func (s *Server) fleet(w http.ResponseWriter, r *http.Request) {
	if s.opts.Fleet == nil {
		writeError(w, http.StatusNotFound, "admin: no rulesSource configured: this gateway is not part of a fleet")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), fleetTimeout)
	defer cancel()
	gws, err := s.opts.Fleet(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "admin: reading the fleet's heartbeats: "+err.Error())
		return
	}
	if gws == nil {
		gws = []FleetGateway{}
	}
	var tot struct {
		Gateways int     `json:"gateways"`
		PassQps  float64 `json:"passQps"`
		BlockQps float64 `json:"blockQps"`
	}
	for _, g := range gws {
		tot.Gateways++
		tot.PassQps += g.PassQps
		tot.BlockQps += g.BlockQps
	}
	out := struct {
		Gateways []FleetGateway `json:"gateways"`
		Totals   any            `json:"totals"`
		Source   *SourceState   `json:"source,omitempty"`
	}{gws, tot, s.opts.State().Source}
	writeJSON(w, http.StatusOK, out)
}

// sourceCollector exports the rules source's state at scrape time.
type sourceCollector struct {
	version, up, lastSeen, fromCache *prometheus.Desc
	state                            func() State
	now                              func() time.Time
}

// RegisterSourceMetrics registers the rules source's series on reg, read
// from state at each scrape: sluice_rules_version (the document version in
// force), sluice_rules_source_up, sluice_rules_source_last_seen_seconds
// (since Redis last answered; +Inf if it never has) and
// sluice_rules_from_cache. Call it once, for a gateway with a rulesSource.
func RegisterSourceMetrics(reg prometheus.Registerer, state func() State, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	return reg.Register(&sourceCollector{
		version:   prometheus.NewDesc("sluice_rules_version", "Version of the fleet's rules document in force (0: none yet).", nil, nil),
		up:        prometheus.NewDesc("sluice_rules_source_up", "1 when the Redis of the rules source answered the last call, else 0.", nil, nil),
		lastSeen:  prometheus.NewDesc("sluice_rules_source_last_seen_seconds", "Seconds since the Redis of the rules source last answered (+Inf: never).", nil, nil),
		fromCache: prometheus.NewDesc("sluice_rules_from_cache", "1 while the rules in force came from the last good file: the gateway started without a valid document from the source, and none has applied since.", nil, nil),
		state:     state,
		now:       now,
	})
}

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.version
	ch <- c.up
	ch <- c.lastSeen
	ch <- c.fromCache
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.state().Source
	if src == nil {
		return
	}
	seen := math.Inf(1)
	if src.LastSeen != nil {
		seen = max(0, c.now().Sub(*src.LastSeen).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.version, prometheus.GaugeValue, float64(src.Version))
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, b2f(src.Up))
	ch <- prometheus.MustNewConstMetric(c.lastSeen, prometheus.GaugeValue, seen)
	ch <- prometheus.MustNewConstMetric(c.fromCache, prometheus.GaugeValue, b2f(src.FromCache))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
