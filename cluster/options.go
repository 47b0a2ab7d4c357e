package cluster

import (
	"errors"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/internal/procid"
)

// Defaults for Options' zero fields.
const (
	// DefaultTimeout bounds one Acquire, queueing and the Redis round trip
	// included. 20ms is Envoy ratelimit's default: a token server slower than
	// that costs more latency than local limiting saves.
	DefaultTimeout = 20 * time.Millisecond
	// DefaultHeartbeat is how often a gateway announces itself for avgLocal
	// rules; it counts as dead after 3 missed beats.
	DefaultHeartbeat = time.Second
	// DefaultNamespace is the key prefix when Options.Namespace is empty.
	DefaultNamespace = "sluice"
)

// Options configures a Service. The zero value of every field but the Redis
// (Redis or URL) has a default (see the field comments).
type Options struct {
	// Redis names the Redis in any of its forms (cluster.redis,
	// cluster.sentinel, cluster.clusterAddrs); URL is short for
	// Redis{Redis: URL}. Exactly one of them is required.
	Redis     config.RedisTarget
	URL       string
	Namespace string         // key prefix; gateways sharing limits share a namespace (default "sluice")
	Timeout   time.Duration  // per-call timeout (default DefaultTimeout, 20ms)
	Heartbeat time.Duration  // avgLocal liveness heartbeat period (default 1s); a gateway expires after 3 periods
	GatewayID string         // unique per process (default: hostname-pid-random)
	Log       zerolog.Logger // state changes, once each; the zero Logger logs nothing
	// OnState, if set, is called once per state change (Redis reachable <->
	// failing), for metrics; never with the same value twice in a row. The
	// first state found is reported as well: true after Run's first
	// heartbeat succeeds, or false if Redis fails first. It runs on the
	// goroutine that saw the change and must not block.
	OnState func(up bool)
	// OnStatus, if set, is called with the new Status whenever it changes:
	// the state as for OnState, or the master nodes found by a heartbeat
	// (a Sentinel failover, a shard's replica promoted). Calls are ordered;
	// it must not block.
	OnStatus func(Status)
	// OnUnanswered, if set, is called for each call that asked Redis to
	// decide (or to charge) and got no decision, with why: its caller
	// falls back. It runs on the caller's goroutine, on the hot path of a
	// failing Redis, and must be cheap (a counter's increment).
	OnUnanswered func(Cause)
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.URL != "" && o.Redis.Form() != config.RedisFormNone:
		return o, errors.New("cluster: both Options.URL and Options.Redis are set")
	case o.URL != "":
		o.Redis = config.RedisTarget{Redis: o.URL}
	case o.Redis.Form() == config.RedisFormNone:
		return o, errors.New("cluster: no redis named")
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.GatewayID == "" {
		o.GatewayID = procid.New()
	}
	return o, nil
}
