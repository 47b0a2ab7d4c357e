package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"sluice/admin"
	"sluice/config"
	"sluice/internal/procid"
	"sluice/internal/redisconn"
	"sluice/rulesource"
)

// fleetStartTimeout bounds the first read of the rules source at start;
// past it the gateway serves the last good rules from its cache.
const fleetStartTimeout = 2 * time.Second

// fleet is a gateway's link to its rules source (docs/fleet.md): the
// document merged with the rules file, the watch that brings new versions,
// the last-good cache and the heartbeats. It is safe for concurrent use.
type fleet struct {
	name  string // the source as messages name it, redis://HOST/DB/KEY
	rdb   *redisconn.Client
	store *rulesource.Store
	cache *rulesource.Cache
	log   zerolog.Logger
	id    string // this gateway in the fleet's heartbeats
	// over are the command line's listeners, which replace the file's in
	// every merge (Options.overrides).
	over config.Overrides

	mu      sync.Mutex
	next    document // the newest document: what the next reload merges
	inForce document // the document of the rules in force
	// fromCache: inForce came from the cache, not (yet) from the source.
	fromCache bool
	up        bool
	saved     string // version and hash of the document last written to the cache
	// noDoc is set while the key holds no document (deleted, or not a
	// document): the next reload reports it and changes nothing.
	noDoc error
}

// document is one version of the rules document as config parses it.
type document struct {
	doc  rulesource.Doc
	name string // how errors name it: the source, or the cache file
	text []byte // what config parses: the text, or the whole cache file
}

// startFleet connects to the rules source that local (the gateway's own
// file, as Load read it) names, and returns the rules to start with: the
// file merged with the stored document, or with the last good one from the
// cache when Redis is down or holds no valid document. Without either it
// fails: a gateway with no rules cannot serve. over (the command line's
// listeners) applies to this merge and every later one.
func startFleet(path string, over config.Overrides, local *config.Config, log zerolog.Logger) (*fleet, *config.Config, error) {
	src := local.RulesSource
	rdb, err := dialSource(src)
	if err != nil {
		return nil, nil, err
	}
	redis.SetLogger(redisLog{log})
	f := &fleet{
		name: src.Name(), rdb: rdb, store: rulesource.New(rdb, src.Key),
		cache: rulesource.NewCache(local.RulesCachePath(), src.Name()),
		log:   log.With().Str("rulesSource", src.Name()).Logger(),
		id:    procid.New(),
		over:  over,
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetStartTimeout)
	defer cancel()
	doc, err := f.store.Pull(ctx)
	var why string
	switch {
	case err == nil && doc.Version > 0:
		f.up = true
		d := document{doc: doc, name: f.name, text: doc.Text}
		cfg, err := f.over.LoadWithDocument(path, d.name, d.text)
		if err == nil {
			f.next = d
			return f, cfg, nil
		}
		logConfigErrors(f.log, err, "the rules document is invalid: trying the last good rules")
		why = "holds an invalid document (version " + strconv.FormatInt(doc.Version, 10) + ")"
	case err == nil:
		f.up = true
		why = "holds no document yet (sluice rules push FILE stores one)"
	default:
		why = "is unreachable (" + err.Error() + ")"
	}
	cached, file, cerr := f.cache.Load()
	if cerr != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("no rules to start with: the rules source %s %s, and there are no last good rules: %v", f.name, why, cerr)
	}
	d := document{doc: cached, name: f.cache.Path(), text: file}
	cfg, err := f.over.LoadWithDocument(path, d.name, d.text)
	if err != nil {
		rdb.Close()
		logConfigErrors(f.log, err, "the last good rules do not fit the rules file")
		return nil, nil, fmt.Errorf("no rules to start with: the rules source %s %s, and the last good rules in %s are invalid with %s", f.name, why, f.cache.Path(), path)
	}
	f.next, f.fromCache, f.saved = d, true, cacheKey(cached)
	f.log.Warn().Str("cache", f.cache.Path()).Int64("version", cached.Version).Str("why", why).
		Msg("serving the last good rules from the cache: the rules source " + why)
	return f, cfg, nil
}

// dialSource connects to the rules source's Redis, in any of its forms,
// with timeouts that notice a dead Redis within a second.
func dialSource(src config.RulesSource) (*redisconn.Client, error) {
	return redisconn.New(src.RedisTarget, redisconn.Options{Timeout: time.Second, DialTimeout: 500 * time.Millisecond, Retries: 1, PoolSize: 4})
}

// started records the document startFleet found as the one in force, once
// the gateway took the rules built with it.
func (f *fleet) started() document {
	f.mu.Lock()
	d := f.next
	f.mu.Unlock()
	f.accepted(d)
	return d
}

// cacheKey tells the documents the cache holds apart.
func cacheKey(d rulesource.Doc) string { return strconv.FormatInt(d.Version, 10) + " " + d.SHA() }

// close releases the Redis client.
func (f *fleet) close() { f.rdb.Close() }

// merge parses the rules file (path, data, as the reloader read it) with
// the newest document; the reloader applies the result and, if it took it,
// calls accepted with the document.
func (f *fleet) merge(path string, data []byte) (*config.Config, document, error) {
	f.mu.Lock()
	d, noDoc := f.next, f.noDoc
	f.mu.Unlock()
	if noDoc != nil {
		return nil, d, noDoc
	}
	cfg, err := f.over.ParseWithDocument(path, data, d.name, d.text)
	return cfg, d, err
}

// mergeInForce parses the rules file with the document in force, so that a
// change to the file applies while the newest document is refused.
func (f *fleet) mergeInForce(path string, data []byte) (*config.Config, document, error) {
	f.mu.Lock()
	d := f.inForce
	f.mu.Unlock()
	cfg, err := f.over.ParseWithDocument(path, data, d.name, d.text)
	return cfg, d, err
}

// accepted records d as the document in force and keeps it as the last
// good one on disk.
func (f *fleet) accepted(d document) {
	f.mu.Lock()
	f.inForce = d
	if d.name == f.name {
		f.fromCache = false
	}
	save := d.name == f.name && cacheKey(d.doc) != f.saved
	if save {
		f.saved = cacheKey(d.doc)
	}
	f.mu.Unlock()
	if save {
		if err := f.cache.Save(d.doc); err != nil {
			// A read-only directory (a ConfigMap): the gateway works, but
			// cannot start with these rules while Redis is down.
			f.log.Warn().Err(err).Str("cache", f.cache.Path()).Msg("cannot keep the last good rules on disk")
		}
	}
}

// onDoc takes a new version from the watch and asks for a reload.
func (f *fleet) onDoc(doc rulesource.Doc, err error, reload func()) {
	f.mu.Lock()
	switch {
	case err != nil:
		f.noDoc = config.Errors{{File: f.name, Msg: err.Error() + "; the rules in force stay"}}
	case doc.Version == 0:
		f.noDoc = config.Errors{{File: f.name, Msg: "the key holds no rules document (was it deleted?); the rules in force stay"}}
	default:
		f.noDoc = nil
		f.next = document{doc: doc, name: f.name, text: doc.Text}
	}
	f.mu.Unlock()
	reload()
}

// onState logs Redis going away and coming back. Back, with the rules in
// force from the cache, the same document is merged again under the
// source's name, so the gateway says it is current: the watch says up only
// after delivering what the key holds, so when next is still the cache's
// document here the key holds that version, and when the key holds none
// (noDoc) there is nothing to relabel and no reload to fail twice.
func (f *fleet) onState(up bool, err error, reload func()) {
	f.mu.Lock()
	was := f.up
	f.up = up
	again := up && f.fromCache && f.next.name != f.name && f.noDoc == nil
	if again {
		f.next = document{doc: f.next.doc, name: f.name, text: f.next.doc.Text}
	}
	f.mu.Unlock()
	switch {
	case !up:
		f.log.Warn().Err(err).Msg("rules source unreachable: the rules in force stay; changes apply when it is back")
	case !was:
		f.log.Info().Msg("rules source reachable")
	}
	if again {
		reload()
	}
}

// watch applies new versions until ctx is done.
func (f *fleet) watch(ctx context.Context, reload func()) {
	f.mu.Lock()
	known := f.inForce.doc
	f.mu.Unlock()
	f.store.Watch(ctx, rulesource.WatchOptions{
		Known:   known,
		OnDoc:   func(d rulesource.Doc, err error) { f.onDoc(d, err, reload) },
		OnState: func(up bool, err error) { f.onState(up, err, reload) },
	})
}

// beat publishes this gateway's heartbeat every second until ctx is done,
// then takes it out of the fleet.
func (f *fleet) beat(ctx context.Context, listen string, rates func() (pass, block float64)) {
	t := time.NewTicker(rulesource.BeatEvery)
	defer t.Stop()
	failing := false // a gateway missing from /api/fleet is said once, at warn
	for {
		pass, block := rates()
		f.mu.Lock()
		v := f.inForce.doc.Version
		f.mu.Unlock()
		bctx, cancel := context.WithTimeout(ctx, time.Second)
		err := f.store.Beat(bctx, rulesource.Beat{ID: f.id, Listen: listen, Version: v, PassQps: pass, BlockQps: block})
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			f.log.Warn().Err(err).Msg("fleet heartbeat not written: this gateway is missing from /api/fleet until it is")
		case err != nil && ctx.Err() == nil:
			f.log.Debug().Err(err).Msg("heartbeat not written")
		case err == nil && failing:
			failing = false
			f.log.Info().Msg("fleet heartbeat written again")
		}
		cancel()
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = f.store.Leave(lctx, f.id)
			cancel()
			return
		case <-t.C:
		}
	}
}

// state is what the admin API and the metrics show of the source.
func (f *fleet) state() *admin.SourceState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := &admin.SourceState{Name: f.name, Version: f.inForce.doc.Version, Up: f.up, Cache: f.cache.Path(), FromCache: f.fromCache}
	if t := f.store.LastSeen(); !t.IsZero() {
		st.LastSeen = &t
	}
	return st
}

// gateways lists the fleet for GET /api/fleet.
func (f *fleet) gateways(ctx context.Context) ([]admin.FleetGateway, error) {
	beats, err := f.store.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.FleetGateway, len(beats))
	for i, b := range beats {
		out[i] = admin.FleetGateway{ID: b.ID, Listen: b.Listen, Version: b.Version, PassQps: b.PassQps, BlockQps: b.BlockQps, LastSeen: b.LastSeen}
	}
	return out, nil
}

// fleetDoc is the admin editor's view of the document.
type fleetDoc struct {
	f    *fleet
	path string // the gateway's rules file, merged with the text to validate it
}

var _ admin.Document = fleetDoc{}

func (d fleetDoc) Name() string { return d.f.name }

func (d fleetDoc) Pull(ctx context.Context) (int64, []byte, error) {
	doc, err := d.f.store.Pull(ctx)
	return doc.Version, doc.Text, err
}

func (d fleetDoc) Push(ctx context.Context, text []byte, basedOn int64) (int64, error) {
	doc, err := d.f.store.Push(ctx, text, basedOn)
	if errors.Is(err, rulesource.ErrConflict) {
		return 0, fmt.Errorf("%w: %v", admin.ErrConflict, err)
	}
	return doc.Version, err
}

func (d fleetDoc) Validate(text []byte) error {
	_, err := d.f.over.LoadWithDocument(d.path, d.f.name, text)
	return err
}
