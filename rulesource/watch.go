package rulesource

import (
	"context"
	"errors"
	"time"
)

// Defaults of WatchOptions' zero fields.
const (
	DefaultPoll        = 250 * time.Millisecond
	DefaultCallTimeout = time.Second
)

// WatchOptions configure Watch. Every field may be zero.
type WatchOptions struct {
	// Known is the document already in force (version and text); Watch
	// delivers only documents that differ from the last one in force or
	// delivered.
	Known Doc
	// Poll is how often the version is read in case a publication is lost
	// (default DefaultPoll).
	Poll time.Duration
	// Timeout bounds each call to Redis (default DefaultCallTimeout).
	Timeout time.Duration
	// OnDoc receives each new document, or a *DataError when the key holds
	// something that is no document (once per distinct error). It runs on
	// Watch's goroutine, never concurrently with itself or OnState.
	OnDoc func(Doc, error)
	// OnState is called when Redis becomes reachable or unreachable, once
	// per change, and for the first state found; err says why it is down.
	// Reachable is said after OnDoc has had what the key holds, so with no
	// OnDoc before it the key holds Known (or the last delivered).
	OnState func(up bool, err error)
}

// Watch delivers new versions of the document until ctx is done. A
// publication on the key's channel wakes it at once; the version is polled
// every Poll besides. Redis going away and coming back needs nothing from
// the caller: the client reconnects, the subscription is renewed, and the
// first answer after an outage reads the whole document again.
func (s *Store) Watch(ctx context.Context, o WatchOptions) {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultCallTimeout
	}
	if o.OnDoc == nil {
		o.OnDoc = func(Doc, error) {}
	}
	if o.OnState == nil {
		o.OnState = func(bool, error) {}
	}
	ps := s.rdb.Subscribe(ctx, s.channel)
	defer ps.Close()
	wake := ps.Channel()

	w := &watch{s: s, o: o, known: o.Known.Version, sha: o.Known.SHA(), full: true}
	t := time.NewTicker(o.Poll)
	defer t.Stop()
	for {
		w.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

// watch is one Watch's state; only its goroutine touches it.
type watch struct {
	s     *Store
	o     WatchOptions
	known int64  // version last in force or delivered
	sha   string // its text's hash
	id    string // the id of the write that stored it, as last read
	full  bool   // read the whole document next: at start and after an outage
	state int    // 0 unknown, 1 up, -1 down
	bad   string // the last DataError delivered, so it is delivered once
}

func (w *watch) check(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
	defer cancel()
	var doc Doc
	var err error
	pulled := true
	if w.full {
		doc, err = w.s.Pull(cctx)
	} else {
		// The version and the id of its write: a key deleted and pushed
		// again between two looks holds the version known under another
		// write's id.
		var v int64
		var id string
		if v, id, err = w.s.stamp(cctx); err == nil && (v != w.known || id != w.id) {
			doc, err = w.s.Pull(cctx)
		} else if err == nil {
			pulled = false
		}
	}
	if ctx.Err() != nil {
		return
	}
	// What the key holds is delivered before Redis is said to be up, so
	// that OnState(true) with nothing delivered means the key holds the
	// document known: a caller may then call that document the source's
	// (one that started from its cache does), and never does so for a
	// version the key no longer holds.
	var de *DataError
	switch {
	case errors.As(err, &de):
		if de.Msg != w.bad {
			w.bad = de.Msg
			w.o.OnDoc(Doc{}, err)
		}
		// Read the whole document once the key is good again: it is
		// delivered then, even as the version known, to clear the error.
		w.full = true
		w.up()
		return
	case err != nil:
		w.full = true
		w.down(err)
		return
	}
	wasBad := w.bad != ""
	w.bad = ""
	if pulled {
		w.id = doc.PushID
		if wasBad || doc.Version != w.known || doc.SHA() != w.sha {
			w.known, w.sha = doc.Version, doc.SHA()
			w.o.OnDoc(doc, nil)
		}
	}
	w.full = false
	w.up()
}

func (w *watch) up() {
	if w.state != 1 {
		w.state = 1
		w.o.OnState(true, nil)
	}
}

func (w *watch) down(err error) {
	if w.state != -1 {
		w.state = -1
		w.o.OnState(false, err)
	}
}
