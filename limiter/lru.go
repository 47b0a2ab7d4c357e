package limiter

import "sync"

// pinner is a value an lru holds: busy values (calls in flight) are not evicted.
type pinner interface {
	pin()
	busy() bool
}

// lru maps origins to state, keeping at most max entries: past the cap it
// evicts the least recently used entry that is not busy (it looks at the
// evictScan oldest); if all of those are busy it grows, so memory stays bounded
// by max plus the calls in flight. Safe for concurrent use.
type lru[V pinner] struct {
	mu    sync.Mutex // guards m and the list
	max   int
	m     map[string]*lruEntry[V]
	root  lruEntry[V] // root.next is the most recent, root.prev the least
	fresh func() V
}

const evictScan = 64

type lruEntry[V pinner] struct {
	key        string
	prev, next *lruEntry[V]
	v          V
}

func newLRU[V pinner](max int, fresh func() V) *lru[V] {
	l := &lru[V]{max: max, m: make(map[string]*lruEntry[V]), fresh: fresh}
	l.root.next, l.root.prev = &l.root, &l.root
	return l
}

func (l *lru[V]) unlink(e *lruEntry[V]) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (l *lru[V]) pushFront(e *lruEntry[V]) {
	e.prev, e.next = &l.root, l.root.next
	l.root.next.prev = e
	l.root.next = e
}

// acquire returns key's value, creating it, pinned: the caller must unpin it.
func (l *lru[V]) acquire(key string) V {
	l.mu.Lock()
	e := l.m[key]
	if e != nil {
		if l.root.next != e {
			l.unlink(e)
			l.pushFront(e)
		}
	} else {
		if len(l.m) >= l.max {
			l.evict()
		}
		e = &lruEntry[V]{key: key, v: l.fresh()}
		l.m[key] = e
		l.pushFront(e)
	}
	e.v.pin()
	l.mu.Unlock()
	return e.v
}

func (l *lru[V]) evict() {
	e := l.root.prev
	for i := 0; i < evictScan && e != &l.root; i++ {
		if !e.v.busy() {
			l.unlink(e)
			delete(l.m, e.key)
			return
		}
		e = e.prev
	}
}

// each calls fn for every entry, most recent first, under the lock.
func (l *lru[V]) each(fn func(key string, v V)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for e := l.root.next; e != &l.root; e = e.next {
		fn(e.key, e.v)
	}
}
