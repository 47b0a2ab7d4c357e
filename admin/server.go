package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/hotparam"
)

// Options wire a Server to the rest of sluice. Every func may be nil: State
// then reports not ready, Stats no resources, Validate only checks that the
// file is YAML, Reload does nothing and Now is time.Now.
type Options struct {
	Log   zerolog.Logger
	Token string // bearer token for writes at first; "" = writes need none (see SetToken)
	// Hosts is admin.hosts at first: the Host names answered besides IP
	// literals and localhost (see SetHosts).
	Hosts    []string
	Registry *prometheus.Registry // served on /metrics; nil = a new empty one
	State    func() State         // rules in force and the last reload result
	Stats    func() []ResourceStats
	// Upstreams reports every upstream and target now (GET /api/upstreams,
	// sluice_upstream_target_up, the dashboard's upstream panel).
	Upstreams func() []UpstreamStats
	// Params and LiftParam serve /api/params: who is being limited now,
	// and lifting one value.
	Params    ParamsFunc
	LiftParam LiftFunc
	// PartitionKey is the pk of a value in the gateway's RateLimit-Policy
	// (nil: none shown).
	PartitionKey PartitionKeyFunc
	// ConfigPath is the rules.yaml the editor writes ("" = editor off).
	ConfigPath string
	// Document, when set, is the fleet's rules document: the editor writes
	// it instead of ConfigPath (see Document).
	Document Document
	// Fleet, when set, lists the gateways that share the rules document
	// (GET /api/fleet).
	Fleet func(ctx context.Context) ([]FleetGateway, error)
	// Validate checks a whole candidate rules.yaml (config.Parse); its error
	// text is shown to the user as is, one problem per line.
	Validate func(path string, data []byte) error
	// Reload asks for the rules to be reloaded now, after the editor wrote.
	Reload func()
	Now    func() time.Time
}

// State is the rules in force and the last reload result, as main.go knows them.
type State struct {
	Ready bool
	// Draining: the gateway is shutting down (its traffic listeners are
	// closed, requests in flight finish); /readyz is 503 so that a load
	// balancer or Kubernetes stops sending it traffic.
	Draining  bool
	Config    any // the *config.Config in force
	Path      string
	LoadedAt  time.Time
	LastError string // "" if the last reload succeeded; else every error line
	// TLSError is the last reload of the TLS certificate files that did not
	// load (the old certificates stay served); "" once they load again.
	TLSError   string
	LastReload time.Time
	// Cluster is the cluster token service's view of its Redis (form,
	// master nodes, up), without passwords; nil when no service runs.
	Cluster any
	// Source is the fleet's rules source; nil without a rulesSource.
	Source *SourceState
	// PendingRestart lists the start-only settings the rules file changed:
	// Config shows their values in force, which stay until the restart.
	PendingRestart []PendingSetting
}

// PendingSetting is a start-only setting whose value in the rules file is
// not the one in force, with passwords masked as in the log.
type PendingSetting struct {
	Setting string `json:"setting"`
	Old     string `json:"old"` // in force
	New     string `json:"new"` // in the file, from the restart on
}

// Server is the admin listener's handler set plus the history sampler. Build
// it with New; it is safe for concurrent use.
type Server struct {
	opts    Options
	hist    *history
	handler http.Handler
	editMu  sync.Mutex // serialises read-check-write of rules.yaml
	token   atomic.Pointer[writeToken]
	hosts   atomic.Pointer[allowedHosts]
	etagKey [32]byte // keys the rules file's ETag (etagOf)
}

// writeToken is the bearer token writes need, with its hash for the
// constant-time comparison.
type writeToken struct {
	token string
	sum   [sha256.Size]byte
}

// SetToken puts a new bearer token in force for writes and the profiler
// ("" = they need none, and are accepted only from a loopback peer): from
// the next request on, the old token is refused. Safe for concurrent use.
func (s *Server) SetToken(token string) {
	s.token.Store(&writeToken{token: token, sum: sha256.Sum256([]byte(token))})
}

// New builds the Server. It registers the sluice_concurrency collector (fed by
// opts.Stats) on opts.Registry.
func New(opts Options) *Server {
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.State == nil {
		opts.State = func() State { return State{} }
	}
	if opts.Stats == nil {
		opts.Stats = func() []ResourceStats { return nil }
	}
	if opts.Upstreams == nil {
		opts.Upstreams = func() []UpstreamStats { return nil }
	}
	if opts.Params == nil {
		opts.Params = func(string, []string, int) ([]hotparam.RuleState, bool) { return nil, false }
	}
	if opts.LiftParam == nil {
		opts.LiftParam = func(context.Context, string, string) (Lifted, bool, error) { return Lifted{}, false, nil }
	}
	if opts.PartitionKey == nil {
		opts.PartitionKey = func(string) string { return "" }
	}
	if opts.Reload == nil {
		opts.Reload = func() {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, hist: newHistory()}
	_, _ = rand.Read(s.etagKey[:]) // never fails (crypto/rand)
	s.SetToken(opts.Token)
	s.SetHosts(opts.Hosts)
	if err := opts.Registry.Register(newConcurrencyCollector(opts.Stats)); err != nil {
		opts.Log.Error().Err(err).Msg("admin: registering sluice_concurrency")
	}
	if err := opts.Registry.Register(newTargetUpCollector(opts.Upstreams)); err != nil {
		opts.Log.Error().Err(err).Msg("admin: registering sluice_upstream_target_up")
	}
	s.handler = s.routes()
	return s
}

// Handler returns the admin listener's router.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(noSniff)
	r.Use(s.checkHost) // every request, reads and probes included
	get(r, "/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	get(r, "/readyz", s.readyz)
	// GET only: another method is 405 with Allow, as on every admin route.
	get(r, "/metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{
		// A failing collector costs its own series, not the whole scrape.
		ErrorHandling: promhttp.ContinueOnError,
	}).ServeHTTP)
	get(r, "/api/rules", s.rules)
	get(r, "/api/rules/raw", s.rawRules)
	get(r, "/api/resources", s.resources)
	get(r, "/api/upstreams", s.upstreams)
	get(r, "/api/history", s.history)
	get(r, "/api/fleet", s.fleet)
	get(r, "/api/params", s.params)
	r.Group(func(r chi.Router) {
		r.Use(s.requireToken(http.StatusUnauthorized))
		r.Put("/api/rules/{section}/{index}", s.editRule)
		r.Post("/api/reload", s.reload)
		r.Delete("/api/params", s.liftParam)
	})
	r.Group(func(r chi.Router) {
		// SPEC section 5: the profiler is 403 to whoever it refuses, a
		// caller without the token included.
		r.Use(s.requireToken(http.StatusForbidden))
		mountProfiler(r)
	})
	get(r, "/", s.dashboard)
	get(r, "/static/*", s.static)
	return r
}

// get serves h on GET and HEAD, as net/http's ServeMux does: uptime
// checkers probe /healthz and /readyz with HEAD (RFC 9110 9.1), and a 405
// lists both in Allow.
func get(r chi.Router, pattern string, h http.HandlerFunc) {
	r.Method(http.MethodGet, pattern, h)
	r.Method(http.MethodHead, pattern, h)
}

// Run samples Stats once a second into the per-resource 5-minute history
// until ctx is done.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.hist.record(s.opts.Now(), s.opts.Stats())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	st := s.opts.State()
	if !st.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("rules not loaded"))
		return
	}
	if st.Draining {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("draining: shutting down, finishing the requests in flight"))
		return
	}
	// Ready either way: the last good rules serve traffic. The body tells
	// an operator (or a probe that reads it) that they are not fresh.
	if src := st.Source; src != nil && src.FromCache {
		_, _ = w.Write([]byte("ready: serving the last good rules from " + src.Cache + " (version " +
			strconv.FormatInt(src.Version, 10) + "), not the rules source " + src.Name))
		return
	}
	_, _ = w.Write([]byte("ready"))
}

// rulesJSON is the body of GET /api/rules.
type rulesJSON struct {
	Ready bool `json:"ready"`
	// Draining: shutdown has begun (/readyz is 503); the rules stay in
	// force for the requests in flight, and nothing is reloaded.
	Draining   bool       `json:"draining"`
	Config     any        `json:"config"`
	Path       string     `json:"path"`
	LoadedAt   *time.Time `json:"loadedAt"`
	LastReload *time.Time `json:"lastReload"`
	LastError  string     `json:"lastError"`
	TLSError   string     `json:"tlsError,omitempty"`
	Cluster    any        `json:"cluster,omitempty"`
	// Source is the fleet's rules source, when the gateway has one.
	Source *SourceState `json:"source,omitempty"`
	// PendingRestart: the start-only settings that wait for a restart.
	PendingRestart []PendingSetting `json:"pendingRestart,omitempty"`
	// TokenRequired tells the dashboard to ask for the token before a write.
	TokenRequired bool `json:"tokenRequired"`
	// Editable is false when no ConfigPath was given.
	Editable bool `json:"editable"`
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// rules serves the rules in force and the last reload; ?config=false
// leaves the rules out (config: null), for a page that polls the rest every
// second: a document of thousands of rules is megabytes.
func (s *Server) rules(w http.ResponseWriter, r *http.Request) {
	st := s.opts.State()
	if r.URL.Query().Get("config") == "false" {
		st.Config = nil
	}
	writer := s.mayWrite(r)
	if c, ok := st.Config.(*config.Config); ok && !writer {
		st.Config, _ = c.WithoutCredentials() // the credentials its rules name, as /api/params masks the traffic's
	}
	if st.LastError != "" && !writer {
		// A failed reload's messages quote the file's values, a
		// credential's too ("duplicate value \"Bearer sk-…\"", with the
		// spelling a rule would need): its secrets are masked, but which
		// values are credentials is known only of a file that loads.
		n, what := strings.Count(st.LastError, "\n")+1, " errors"
		if n == 1 {
			what = " error"
		}
		st.LastError = "the last reload failed (" + strconv.Itoa(n) + what +
			"); read them with the admin token (Authorization: Bearer), or in the log"
	}
	writeJSON(w, http.StatusOK, rulesJSON{
		Ready: st.Ready, Draining: st.Draining, Config: st.Config, Path: st.Path,
		LoadedAt: timeOrNil(st.LoadedAt), LastReload: timeOrNil(st.LastReload), LastError: st.LastError,
		TLSError: st.TLSError, Cluster: st.Cluster, Source: st.Source, PendingRestart: st.PendingRestart,
		TokenRequired: s.token.Load().token != "", Editable: s.opts.ConfigPath != "" || s.opts.Document != nil,
	})
}

// resources serves the numbers now; ?origins=N lists the N most active
// origins per resource (default 50, "all" for every tracked one), ?top=N
// only the N most active resources (default all; the dashboard asks for a
// page's worth, so that a document of 10,000 routes does not make each of
// its polls megabytes and its page 10,000 charts).
func (s *Server) resources(w http.ResponseWriter, r *http.Request) {
	shown, ok := countParam(r, "origins", defaultOriginsShown)
	if !ok {
		writeError(w, http.StatusBadRequest, "admin: origins must be a number from 0 or \"all\"")
		return
	}
	top, ok := countParam(r, "top", -1)
	if !ok {
		writeError(w, http.StatusBadRequest, "admin: top must be a number from 0 or \"all\"")
		return
	}
	// A copy: Stats may hand out slices it keeps.
	stats := slices.Clone(s.opts.Stats())
	if stats == nil {
		stats = []ResourceStats{}
	}
	total := len(stats)
	stats = topResources(stats, top)
	// An origin read from a credential (origin.from: header:X-Api-Key) is
	// a caller's key: shown, as /api/params shows such values, only to a
	// reader who could write; the others get its keyed hash, which stays
	// one name per origin while the process runs.
	mask := false
	if c, ok := s.opts.State().Config.(*config.Config); ok && c.Origin.From.Credential() {
		mask = !s.mayWrite(r)
	}
	for i := range stats {
		stats[i].OriginsTotal = len(stats[i].Origins)
		stats[i].Origins = topOrigins(slices.Clone(stats[i].Origins), shown)
		if mask {
			for j := range stats[i].Origins {
				o := &stats[i].Origins[j]
				o.Name = "pk:" + s.opts.PartitionKey(o.Name)
			}
		}
	}
	writeJSON(w, http.StatusOK, struct {
		At        int64           `json:"at"`
		Resources []ResourceStats `json:"resources"`
		// ResourcesTotal is how many resources there are; Resources lists
		// them all, or the ?top=N most active.
		ResourcesTotal int `json:"resourcesTotal"`
	}{s.opts.Now().UnixMilli(), stats, total})
}

// countParam reads the query parameter name: a number from 0, or "all"
// (-1); def when it is absent. ok is false for anything else.
func countParam(r *http.Request, name string, def int) (n int, ok bool) {
	switch q := r.URL.Query().Get(name); q {
	case "":
		return def, true
	case "all":
		return -1, true
	default:
		n, err := strconv.Atoi(q)
		return n, err == nil && n >= 0
	}
}

// history serves the per-second samples; ?since=<Unix ms> returns only newer
// ones, so a page polling every second fetches one sample per resource;
// &resource=R (repeatable) only those of the resources named, so a page
// showing some resources of many does not fetch them all.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, _ := strconv.ParseInt(q.Get("since"), 10, 64)
	var only map[string]bool
	if names, ok := q["resource"]; ok {
		only = make(map[string]bool, len(names))
		for _, n := range names {
			only[n] = true
		}
	}
	writeJSON(w, http.StatusOK, struct {
		At        int64        `json:"at"`
		StepMs    int64        `json:"stepMs"`
		Resources []seriesJSON `json:"resources"`
	}{s.opts.Now().UnixMilli(), 1000, s.hist.snapshotOf(since, only)})
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if s.opts.State().Draining {
		// The watcher and the reloader have stopped: a 202 here promised
		// a reload that never came.
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "draining: the gateway is shutting down and reloads nothing"})
		return
	}
	s.opts.Log.Info().Str("remote", r.RemoteAddr).Msg("admin: reload requested")
	s.opts.Reload()
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "reload requested"})
}

// noSniff keeps a browser to each answer's Content-Type: a JSON answer
// quoting a client's bytes, or /metrics, is never run as a script or
// shown as a page.
func noSniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// errorJSON is every error body: a message and, for an invalid edit, the
// validator's lines.
type errorJSON struct {
	Error string   `json:"error"`
	Lines []string `json:"lines,omitempty"`
}

func writeError(w http.ResponseWriter, code int, msg string, lines ...string) {
	writeJSON(w, code, errorJSON{Error: msg, Lines: lines})
}
