package lru_test

import (
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"sluice/internal/lru"
)

// slot is a test value: it may go from free on (math.MinInt64: now,
// math.MaxInt64: not by time), and counts its uses.
type slot struct {
	free int64
	uses int
}

func newCache(capacity int, full lru.Full) *lru.Cache[slot] {
	return lru.New(lru.Options[slot]{
		Cap:  capacity,
		Full: full,
		Init: func(v *slot, _ string) { v.free = math.MinInt64 },
		Free: func(v *slot) int64 { return v.free },
	})
}

// use gets key at now, counts a use and sets when it may go; ok is false
// when the cache refused the key.
func use(c *lru.Cache[slot], key string, now, free int64) (uses int, ok bool) {
	e, sh := c.Get(key, now)
	defer sh.Unlock()
	if e == nil {
		return 0, false
	}
	e.V.uses++
	e.V.free = free
	return e.V.uses, true
}

var modes = []struct {
	name string
	full lru.Full
}{{"refuse", lru.Refuse}, {"grow", lru.Grow}}

func TestLenNeverExceedsCap(t *testing.T) {
	for _, m := range modes {
		for _, capacity := range []int{1, 100, 5000} { // 5000 spreads over several shards
			t.Run(m.name+"/"+strconv.Itoa(capacity), func(t *testing.T) {
				c := newCache(capacity, m.full)
				for i := range 3 * capacity {
					use(c, strconv.Itoa(i), int64(i), math.MinInt64)
					if i%97 == 0 || i == 3*capacity-1 {
						if n := c.Len(); n > capacity {
							t.Fatalf("after %d distinct keys %d are tracked, cap %d", i+1, n, capacity)
						}
					}
				}
				if n := c.Len(); n != capacity {
					t.Errorf("after 3x cap distinct keys %d are tracked, want the cap %d", n, capacity)
				}
			})
		}
	}
}

// An evicted key comes back fresh; a key kept recent keeps its value.
func TestEvictionForgetsOnlyLeastRecentlyUsed(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c := newCache(10, m.full)
			use(c, "hot", 0, math.MinInt64)
			use(c, "cold", 0, math.MinInt64)
			for i := range 20 {
				use(c, "hot", 0, math.MinInt64)
				use(c, strconv.Itoa(i), 0, math.MinInt64)
			}
			if n, _ := use(c, "hot", 0, math.MinInt64); n != 22 {
				t.Errorf("a recently used key was evicted: %d uses, want 22", n)
			}
			if n, _ := use(c, "cold", 0, math.MinInt64); n != 1 {
				t.Errorf("the least recently used key kept its value: %d uses, want 1 (fresh)", n)
			}
		})
	}
}

// A busy entry is not evicted: not one in use (free only when released), not
// one busy until an instant still ahead.
func TestBusyEntriesAreNotEvicted(t *testing.T) {
	for _, m := range modes {
		for _, busy := range []struct {
			name string
			free int64
		}{{"in use", math.MaxInt64}, {"busy for a while", 1000}} {
			t.Run(m.name+"/"+busy.name, func(t *testing.T) {
				c := newCache(10, m.full)
				use(c, "v", 0, busy.free)
				for i := range 30 {
					if _, ok := use(c, strconv.Itoa(i), int64(i), math.MinInt64); !ok {
						t.Fatalf("key %d refused while idle keys could be evicted", i)
					}
				}
				if n, _ := use(c, "v", 30, busy.free); n != 2 {
					t.Error("a busy entry was evicted and came back fresh")
				}
			})
		}
	}
}

// A Refuse cache refuses a new key only when no tracked entry may go,
// wherever the idle ones sit: behind entries in use for long (streams, long
// polls) added early, or in another shard. Each case fills the cache, frees
// some entries, then offers fresh keys and keeps them busy: as many are
// taken as there were free entries, and the next is refused.
func TestRefuseOnlyWhenNothingMayGo(t *testing.T) {
	tests := []struct {
		name   string
		cap    int
		isIdle func(i int) bool
	}{
		{"20 busy at the LRU end, 80 idle", 100, func(i int) bool { return i >= 20 }},
		{"one idle behind 99 busy", 100, func(i int) bool { return i == 99 }},
		{"every tenth idle", 100, func(i int) bool { return i%10 == 9 }},
		// 4096 keys over 4 shards: the idle one is in the middle of its
		// shard's list, and most fresh keys land in other shards.
		{"one idle in another shard", 4096, func(i int) bool { return i == 2000 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(tc.cap, lru.Refuse)
			idle := 0
			for i := range tc.cap {
				free := int64(math.MaxInt64)
				if tc.isIdle(i) {
					free = math.MinInt64
					idle++
				}
				if _, ok := use(c, "old"+strconv.Itoa(i), 0, free); !ok {
					t.Fatalf("key %d of %d refused below the cap", i, tc.cap)
				}
			}
			for i := range idle + 1 {
				_, ok := use(c, "new"+strconv.Itoa(i), 1, math.MaxInt64)
				if i < idle && !ok {
					t.Fatalf("fresh key %d refused while %d tracked entries were idle", i, idle-i)
				}
				if i == idle && ok {
					t.Fatalf("fresh key %d taken while all %d entries were busy", i, tc.cap)
				}
			}
			if n := c.Len(); n != tc.cap {
				t.Errorf("tracked %d, want the cap %d", n, tc.cap)
			}
		})
	}
}

// When every entry is busy a Refuse cache refuses, twice (the second
// refusal, from the remembered scan, must not hide a later change), and
// takes the key as soon as one entry may go, however that happens.
func TestRefuseUntilAnEntryMayGo(t *testing.T) {
	tests := []struct {
		name string
		busy int64 // free instant of the two entries
		// free makes entry a free to go, returning when to try again.
		free func(c *lru.Cache[slot], a *lru.Entry[slot]) int64
	}{
		{"released", math.MaxInt64, func(c *lru.Cache[slot], a *lru.Entry[slot]) int64 {
			// As a call that ends does: without the lock, then announced.
			a.V.free = math.MinInt64
			c.Released(a)
			return 10
		}},
		{"its time comes", 100, func(*lru.Cache[slot], *lru.Entry[slot]) int64 { return 100 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(2, lru.Refuse)
			a, sh := c.Get("a", 0)
			a.V.free = tc.busy
			sh.Unlock()
			use(c, "b", 0, max(tc.busy, 1000))
			for _, at := range []int64{0, 5} {
				if _, ok := use(c, "c", at, math.MinInt64); ok {
					t.Fatal("a third key was taken while the two tracked entries, the cap, were busy")
				}
			}
			if n := c.Len(); n != 2 {
				t.Errorf("tracked %d, want 2", n)
			}
			at := tc.free(c, a)
			if _, ok := use(c, "c", at, math.MinInt64); !ok {
				t.Error("a new key was refused after a tracked entry became free to go")
			}
		})
	}
}

// A Grow cache never refuses: with every entry busy it grows past the cap,
// and forgets nothing busy.
func TestGrowWhenAllBusy(t *testing.T) {
	c := newCache(2, lru.Grow)
	use(c, "a", 0, math.MaxInt64)
	use(c, "b", 0, math.MaxInt64)
	for i := range 10 {
		if _, ok := use(c, strconv.Itoa(i), 0, math.MinInt64); !ok {
			t.Fatal("a Grow cache refused a key")
		}
	}
	if n, _ := use(c, "a", 0, math.MaxInt64); n != 2 {
		t.Error("a busy entry was forgotten")
	}
	if n := c.Len(); n != 3 {
		t.Errorf("tracked %d, want the 2 busy entries and the latest idle one", n)
	}
}

// A key may be 64 KiB. Two long keys differing only at their end are
// separate entries, Each shows them readably, and what an entry keeps of a
// key is bounded: 500 keys of 60 KiB held 31 MiB when kept whole.
func TestLongKeys(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c := newCache(100000, m.full)
			pad := strings.Repeat("é", 30<<10) // 60 KiB; a 2-byte rune straddles the prefix
			long := func(i int) string { return "o" + pad + strconv.Itoa(i) }
			use(c, long(1), 0, math.MinInt64)
			if n, _ := use(c, long(2), 0, math.MinInt64); n != 1 {
				t.Errorf("two long keys differing at the end share an entry")
			}
			if n, _ := use(c, long(1), 0, math.MinInt64); n != 2 {
				t.Errorf("a long key's entry was not found again")
			}
			c.Each(func(name string, _ bool, _ *slot) {
				if len(name) > 100 || !strings.HasPrefix(name, "oéé") || !strings.Contains(name, "é…#") {
					t.Errorf("long key shown as %.120q, want its first characters, …# and a digest", name)
				}
			})

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i := range 500 {
				use(c, strconv.Itoa(i)+pad, 0, math.MinInt64) // a fresh 60 KiB string each time
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if n := c.Len(); n != 502 {
				t.Fatalf("tracked %d, want 502", n)
			}
			if held := int64(after.HeapAlloc) - int64(before.HeapAlloc); held > 1<<20 {
				t.Errorf("500 tracked keys of 60 KiB hold %d KiB, want under 1 MiB", held>>10)
			}
			runtime.KeepAlive(pad)
		})
	}
}

func TestShortKeysShownAsTheyAre(t *testing.T) {
	c := newCache(10, lru.Grow)
	k := strings.Repeat("k", lru.MaxKeyLen)
	use(c, k, 0, math.MinInt64)
	use(c, "b", 0, math.MinInt64)
	var got []string
	c.Each(func(name string, _ bool, _ *slot) { got = append(got, name) })
	if len(got) != 2 || got[0] != "b" || got[1] != k {
		t.Errorf("Each showed %q, want b then the 64-byte key, most recent first", got)
	}
}

func TestGetTrackedKeyDoesNotAllocate(t *testing.T) {
	for _, key := range []string{"12345", strings.Repeat("x", 200)} {
		c := newCache(10, lru.Refuse)
		use(c, key, 0, math.MinInt64)
		if n := testing.AllocsPerRun(1000, func() { use(c, key, 0, math.MinInt64) }); n != 0 {
			t.Errorf("Get of a tracked %d-byte key: %v allocations, want 0", len(key), n)
		}
	}
}

// A cache that no key has reached holds almost nothing, whatever its cap:
// a gateway loads one per rule (100,000 values by default), and 10,000
// rules held 150 MB of empty shards. Len and Each see an empty cache; the
// first Get makes the shards and works as before.
func TestUnusedCacheIsSmall(t *testing.T) {
	const n = 1000
	caches := make([]*lru.Cache[slot], n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range caches {
		caches[i] = newCache(100000, lru.Refuse)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n; per > 512 {
		t.Errorf("an unused cache of cap 100000 holds %d bytes, want under 512", per)
	}
	c := caches[0]
	if c.Len() != 0 {
		t.Errorf("an unused cache has %d keys", c.Len())
	}
	c.Each(func(name string, _ bool, _ *slot) { t.Errorf("Each of an unused cache showed %q", name) })
	for i := range 3 {
		use(c, strconv.Itoa(i), 0, math.MinInt64)
	}
	if c.Len() != 3 {
		t.Errorf("tracked %d after 3 keys, want 3", c.Len())
	}
	runtime.KeepAlive(caches)
}

// Peek finds a key without tracking it or making it recent; Forget drops a
// key, which then starts afresh, and frees its place under the cap.
func TestPeekAndForget(t *testing.T) {
	for _, key := range []string{"short", strings.Repeat("long", 40)} {
		c := newCache(2, lru.Refuse)
		if peekUses(c, key) != -1 {
			t.Fatal("Peek found a key never used")
		}
		if c.Len() != 0 {
			t.Fatalf("Peek tracked the key: %d tracked", c.Len())
		}
		use(c, key, 0, math.MaxInt64) // busy: eviction may never take it
		use(c, key, 0, math.MaxInt64)
		if n := peekUses(c, key); n != 2 {
			t.Fatalf("Peek of a tracked key: %d uses, want 2", n)
		}
		use(c, "other", 0, math.MaxInt64)
		if _, ok := use(c, "third", 0, math.MaxInt64); ok {
			t.Fatal("a third busy key passed the cap")
		}
		if !c.Forget(key) || c.Forget(key) {
			t.Fatal("Forget of a tracked key, then of a forgotten one: want true, false")
		}
		if n, ok := use(c, "third", 0, math.MaxInt64); !ok || n != 1 {
			t.Fatalf("after Forget, a new key: uses %d, ok %v; want 1, true", n, ok)
		}
		if c.Len() != 2 {
			t.Fatalf("%d tracked, want 2", c.Len())
		}
		c.Forget("third")
		if n, _ := use(c, key, 0, math.MinInt64); n != 1 {
			t.Fatalf("a forgotten key came back with %d uses, want 1 (fresh)", n)
		}
	}
}

// peekUses is key's uses, -1 if it is not tracked.
func peekUses(c *lru.Cache[slot], key string) int {
	e, sh := c.Peek(key)
	defer sh.Unlock()
	if e == nil {
		return -1
	}
	return e.V.uses
}

// A key kept in its long form is forgotten by its whole key, or by its
// name as Each lists it; a name no entry has forgets nothing.
func TestForgetLongKeyByName(t *testing.T) {
	c := newCache(100, lru.Refuse)
	long := strings.Repeat("k", 200)
	other := strings.Repeat("o", 200)
	use(c, long, 0, math.MinInt64)
	use(c, other, 0, math.MinInt64)
	var names []string
	c.Each(func(name string, _ bool, _ *slot) { names = append(names, name) })
	var listed string
	for _, n := range names {
		if strings.HasPrefix(n, "kkk") {
			listed = n
		}
	}
	if listed == "" {
		t.Fatalf("names %q", names)
	}
	wrong := listed[:len(listed)-1] + "0"
	if strings.HasSuffix(listed, "0") {
		wrong = listed[:len(listed)-1] + "1"
	}
	if c.Forget(wrong) || c.Len() != 2 {
		t.Fatalf("a name no entry has forgot one: %d left", c.Len())
	}
	if !c.Forget(listed) || c.Len() != 1 || peekUses(c, long) != -1 || peekUses(c, other) != 1 {
		t.Fatalf("Forget by the listed name %q: %d left", listed, c.Len())
	}
}

// carried is a test key: short, or long enough to be kept by its digest.
func carried(i int) string {
	if i%3 == 0 {
		return strings.Repeat("é", 40) + strconv.Itoa(i)
	}
	return "k" + strconv.Itoa(i)
}

// Carry takes over the entries keep accepts, long keys included (found
// again by their whole key, though only a digest is kept), without Init;
// the others are new in the new cache. Whatever the two caps, the new
// cache stays within its own, and a smaller cap keeps recent entries.
func TestCarry(t *testing.T) {
	const n = 5000 // several shards
	for _, capacity := range []int{n, 2 * n, 100, 1} {
		t.Run(strconv.Itoa(capacity), func(t *testing.T) {
			from := newCache(n, lru.Refuse)
			for i := range n {
				for range i%4 + 1 {
					use(from, carried(i), 0, math.MinInt64)
				}
			}
			c := newCache(capacity, lru.Refuse)
			c.Carry(from, func(dst, src *slot) bool {
				if src.uses == 1 { // nothing to carry
					return false
				}
				dst.uses, dst.free = src.uses+100, math.MinInt64+1 // Init would have set MinInt64
				return true
			})
			want := min(capacity, n*3/4)
			if got := c.Len(); got != want {
				t.Fatalf("%d carried into a cache of %d, want %d", got, capacity, want)
			}
			found := 0
			for i := range n {
				u := peekUses(c, carried(i))
				switch {
				case u == -1:
				case i%4 == 0 || u != i%4+101:
					t.Fatalf("key %d: %d uses in the new cache, want %d", i, u, i%4+101)
				default:
					found++
					if capacity < n && i < n-300 {
						t.Errorf("a cap of %d carried key %d, not among the most recent", capacity, i)
					}
				}
			}
			if found != want {
				t.Fatalf("found %d carried keys, want %d", found, want)
			}
			if capacity >= n {
				if u, _ := use(c, carried(4), 0, math.MinInt64); u != 1 {
					t.Errorf("a key keep refused: %d uses, want 1 (Init)", u)
				}
			}
			// The values from holds are its own still.
			if u := peekUses(from, carried(1)); u != 2 {
				t.Errorf("from's key 1 has %d uses after Carry, want 2", u)
			}
		})
	}
}

// Carried entries keep their order: past the cap the least recent goes
// first.
func TestCarryKeepsOrder(t *testing.T) {
	from := newCache(3, lru.Refuse)
	for _, k := range []string{"a", "b", "c"} {
		use(from, k, 0, math.MinInt64)
	}
	use(from, "a", 0, math.MinInt64) // b is now the least recent
	c := newCache(3, lru.Refuse)
	c.Carry(from, func(dst, src *slot) bool { *dst = *src; return true })
	use(c, "d", 0, math.MinInt64)
	if peekUses(c, "b") != -1 || peekUses(c, "a") != 2 || peekUses(c, "c") != 1 {
		t.Errorf("after one more key the carried cache holds a %d, b %d, c %d uses; want 2, none, 1",
			peekUses(c, "a"), peekUses(c, "b"), peekUses(c, "c"))
	}
	defer func() {
		if recover() == nil {
			t.Error("Carry into a cache in use did not panic")
		}
	}()
	c.Carry(from, func(dst, src *slot) bool { return true })
}

// Carry reads a cache that is in use (a rule still serving while the one
// that replaces it is compiled): run with -race.
func TestCarryFromCacheInUse(t *testing.T) {
	from := newCache(5000, lru.Refuse)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20000 {
			use(from, carried(i%6000), int64(i), math.MinInt64)
		}
	}()
	for range 20 {
		c := newCache(5000, lru.Refuse)
		c.Carry(from, func(dst, src *slot) bool { *dst = *src; return true })
		if c.Len() > 5000 {
			t.Fatalf("%d carried, over the cap", c.Len())
		}
	}
	<-done
}
