package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Slow clients (docs/configuration.md#server-what-one-client-may-hold): a
// client that stops reading holds its slots for at most server.sendTimeout,
// and one HTTP/2 connection holds at most server.maxConcurrentStreams.

// scBigBody is what the large answer announces: far more than any socket
// buffer, so a client that does not read makes the gateway's writes wait.
const scBigBody = 1 << 30

// scBigUpstream answers every request with scBigBody bytes, written until
// the gateway takes no more; cut counts the answers the gateway cancelled.
type scBigUpstream struct {
	*upstream
	mu  sync.Mutex
	cut int
}

func startBigUpstream(t *testing.T) *scBigUpstream {
	u := &scBigUpstream{}
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	u.upstream = startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(scBigBody))
		for sent := 0; sent < scBigBody; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				u.mu.Lock()
				u.cut++
				u.mu.Unlock()
				return
			}
		}
	})
	return u
}

func (u *scBigUpstream) counts() (inFlight int64, cut int) {
	u.upstream.mu.Lock()
	inFlight = u.upstream.inFlight
	u.upstream.mu.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	return inFlight, u.cut
}

// scDialSlow opens an HTTP/1.1 connection with a 4 KiB receive buffer,
// sends GET path and never reads.
func scDialSlow(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return c
}

// scH2 is an HTTP/2 client (h2c, prior knowledge) on one connection that
// reads every frame but never sends WINDOW_UPDATE: once a stream's (or the
// connection's) 64 KiB window is spent, the server may send it nothing more.
type scH2 struct {
	t    *testing.T
	conn net.Conn
	addr string

	wmu sync.Mutex // the framer's writes and the encoder
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer

	mu     sync.Mutex
	status map[uint32]string        // :status per stream
	data   map[uint32]int           // DATA bytes per stream
	resets map[uint32]http2.ErrCode // RST_STREAM per stream
	nReset map[uint32]int           // RST_STREAM frames per stream
	reset1 map[uint32]time.Time     // when the first came
	maxStr uint32                   // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	done   chan struct{}            // the read loop ended
}

func scDialH2C(t *testing.T, addr string) *scH2 {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	h := &scH2{t: t, conn: c, addr: addr, status: map[uint32]string{}, data: map[uint32]int{},
		resets: map[uint32]http2.ErrCode{}, nReset: map[uint32]int{}, reset1: map[uint32]time.Time{}, done: make(chan struct{})}
	t.Cleanup(func() { c.Close(); <-h.done })
	h.fr = http2.NewFramer(c, c)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.enc = hpack.NewEncoder(&h.hb)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	h.write(func() error { return h.fr.WriteSettings() })
	go h.read()
	return h
}

func (h *scH2) write(f func() error) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if err := f(); err != nil {
		h.t.Errorf("h2 client write: %v", err)
	}
}

func (h *scH2) read() {
	defer close(h.done)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		h.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
					h.maxStr = v
				}
				go h.write(func() error { return h.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				go h.write(func() error { return h.fr.WritePing(true, f.Data) })
			}
		case *http2.MetaHeadersFrame:
			h.status[f.StreamID] = f.PseudoValue("status")
		case *http2.DataFrame:
			h.data[f.StreamID] += len(f.Data())
		case *http2.RSTStreamFrame:
			h.resets[f.StreamID] = f.ErrCode
			if h.nReset[f.StreamID]++; h.nReset[f.StreamID] == 1 {
				h.reset1[f.StreamID] = time.Now()
			}
		}
		h.mu.Unlock()
	}
}

// get opens stream id with GET path.
func (h *scH2) get(id uint32, path string) {
	h.write(func() error {
		h.hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", h.addr}, {":path", path}} {
			if err := h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
				return err
			}
		}
		return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hb.Bytes(), EndStream: true, EndHeaders: true})
	})
}

// stream is what the client saw of stream id.
func (h *scH2) stream(id uint32) (status string, data int, reset http2.ErrCode, wasReset bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	reset, wasReset = h.resets[id]
	return h.status[id], h.data[id], reset, wasReset
}

// scSlowRules: one route with a concurrency rule of count, sendTimeout and
// maxConcurrentStreams as given, h2c on the plain listener.
func scSlowRules(upURL, forwarder string, count int, server string) string {
	return fmt.Sprintf(`http2: { h2c: true }
server: %s
upstreams:
  up: { targets: [%q], timeout: 60s }
routes:
  - { path: /big/*, upstream: up, resource: big, forwarder: %s }
flowRules:
  - { resource: big, grade: concurrency, count: %d }
`, server, upURL, forwarder, count)
}

// TestHardeningSlowReadersReleaseSlots: a concurrency rule of 2, both slots
// taken by clients that stop reading a large answer, one over HTTP/1.1 (a
// shut TCP window) and one over h2c (a stream window never opened, the
// connection read). With sendTimeout 1s both are cut: the HTTP/1.1
// connection is closed, the h2 stream reset, the upstream calls cancelled
// and the slots freed, so a third client passes within sendTimeout + 1 s.
// On both forwarders.
func TestHardeningSlowReadersReleaseSlots(t *testing.T) {
	const sendTimeout = time.Second
	for _, fwd := range []string{"fast", "standard"} {
		t.Run(fwd, func(t *testing.T) {
			up := startBigUpstream(t)
			g := startGateway(t, scSlowRules(up.URL, fwd, 2, "{ sendTimeout: 1s }"))
			addr := hdAddr(g.URL)

			slow1 := scDialSlow(t, addr, "/big/h1")
			h2 := scDialH2C(t, addr)
			h2.get(1, "/big/h2")
			poll(t, 10*time.Second, "both slow readers hold a slot", func() bool {
				return hdConcurrency(t, g, "big") == 2
			})
			held := time.Now()
			// They hold the slots: a third client is refused...
			third := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
			try := func() int {
				resp, err := third.Get(g.URL + "/big/third")
				if err != nil {
					t.Fatalf("third client: %v", err)
				}
				resp.Body.Close() // its answer is cancelled in turn
				return resp.StatusCode
			}
			if code := try(); code != 429 {
				t.Fatalf("third client while both slots are held: %d, want 429", code)
			}
			// ...until sendTimeout cuts the slow readers.
			var passed time.Duration
			for {
				if code := try(); code == 200 {
					passed = time.Since(held)
					break
				} else if code != 429 {
					t.Fatalf("third client: %d, want 429 then 200", code)
				}
				if time.Since(held) > 10*time.Second {
					t.Fatalf("the third client still gets 429 %v after the slots were taken (sendTimeout %v)", time.Since(held), sendTimeout)
				}
				time.Sleep(25 * time.Millisecond)
			}
			if passed > sendTimeout+time.Second {
				t.Errorf("the third client passed %v after the slow readers took the slots, want within sendTimeout + 1s = %v",
					passed, sendTimeout+time.Second)
			}
			// Both slow readers are cut, not only the first one: their slots
			// are free within the same bound, before slow1 is read below.
			poll(t, 10*time.Second, "both slow readers' slots released", func() bool {
				return hdConcurrency(t, g, "big") == 0
			})
			if freed := time.Since(held); freed > sendTimeout+time.Second {
				t.Errorf("both slots were free %v after the slow readers took them, want within sendTimeout + 1s", freed)
			}
			t.Logf("third client passed %v after the slots were taken", passed)

			// The HTTP/1.1 reader's connection was closed: reading it now
			// ends (EOF or reset) well short of the announced length.
			_ = slow1.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, slow1)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("the slow HTTP/1.1 connection is still open after %d bytes", n)
			} else if n >= scBigBody {
				t.Errorf("the slow HTTP/1.1 reader got %d bytes, the whole answer", n)
			}
			// The h2 stream was reset, the connection kept.
			poll(t, 5*time.Second, "the h2 stream reset", func() bool {
				_, _, _, reset := h2.stream(1)
				return reset
			})
			status, data, code, _ := h2.stream(1)
			if status != "200" || data > 1<<20 || code != http2.ErrCodeInternal {
				t.Errorf("h2 stream: status %q, %d bytes, reset %v; want 200, at most its window, INTERNAL_ERROR", status, data, code)
			}
			select {
			case <-h2.done:
				t.Error("the h2 connection was closed; only its stream should be cut")
			default:
			}
			// Every upstream call was cancelled: the two slow readers' and
			// the third client's, and nothing is held.
			poll(t, 5*time.Second, "upstream calls cancelled", func() bool {
				inFlight, cut := up.counts()
				return inFlight == 0 && cut >= 3
			})
			hdWaitConcurrencyZero(t, g, "big")
			if n, _ := up.stats(); n < 3 {
				t.Errorf("upstream saw %d requests, want the 2 slow readers' and the third client's", n)
			}
			hdHealthy(t, g)
			// A closed stream gets no more frames (RFC 9113 5.1): the
			// stream's flush deadline, set anew after the cut, sent a
			// second RST_STREAM a sendTimeout later.
			h2.mu.Lock()
			first := h2.reset1[1]
			h2.mu.Unlock()
			time.Sleep(time.Until(first.Add(2*sendTimeout + 500*time.Millisecond)))
			h2.mu.Lock()
			resets := h2.nReset[1]
			h2.mu.Unlock()
			if resets != 1 {
				t.Errorf("the cut h2 stream got %d RST_STREAM frames, want 1", resets)
			}
		})
	}
}

// TestHardeningH2MaxConcurrentStreams: with maxConcurrentStreams 3, one h2c
// connection that opens 10 streams of a large answer and never opens a
// window holds 3 slots of a concurrency-4 rule, never more: the server
// advertises 3 and refuses the other streams, the upstream sees 3
// requests, and another client still passes.
func TestHardeningH2MaxConcurrentStreams(t *testing.T) {
	up := startBigUpstream(t)
	g := startGateway(t, scSlowRules(up.URL, "auto", 4, "{ maxConcurrentStreams: 3 }"))
	h2 := scDialH2C(t, hdAddr(g.URL))
	for i := range 10 {
		h2.get(uint32(2*i+1), fmt.Sprintf("/big/%d", i))
	}
	poll(t, 10*time.Second, "7 of the 10 streams refused", func() bool {
		n := 0
		for i := range 10 {
			if _, _, code, reset := h2.stream(uint32(2*i + 1)); reset && code != http2.ErrCodeInternal {
				n++
			}
		}
		return n == 7
	})
	poll(t, 10*time.Second, "3 streams in flight upstream", func() bool {
		inFlight, _ := up.counts()
		return inFlight == 3
	})
	h2.mu.Lock()
	advertised := h2.maxStr
	h2.mu.Unlock()
	if advertised != 3 {
		t.Errorf("the server advertised SETTINGS_MAX_CONCURRENT_STREAMS %d, want 3", advertised)
	}
	if c := hdConcurrency(t, g, "big"); c != 3 {
		t.Errorf("the h2 connection holds %d slots, want 3", c)
	}
	if n, _ := up.stats(); n != 3 {
		t.Errorf("upstream saw %d requests from the connection, want 3", n)
	}
	// The fourth slot is another client's.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.URL+"/big/other", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("another client: %d, want 200 (the h2 connection may hold only 3 of the 4 slots)", resp.StatusCode)
	}
	hdHealthy(t, g)
}

// TestReloadSendTimeoutAppliesToNewConnections: a reload that shortens
// sendTimeout applies it to the connections opened after it (a slow reader
// there is cut and its slot freed) while one opened before keeps its own;
// a reload that changes a start-only server setting warns.
func TestReloadSendTimeoutAppliesToNewConnections(t *testing.T) {
	up := startBigUpstream(t)
	g := startGateway(t, scSlowRules(up.URL, "auto", 2, "{ sendTimeout: 1h }"))
	addr := hdAddr(g.URL)
	scDialSlow(t, addr, "/big/before")
	poll(t, 10*time.Second, "the first slow reader holds a slot", func() bool {
		return hdConcurrency(t, g, "big") == 1
	})

	g.writeRules(scSlowRules(up.URL, "auto", 2, "{ sendTimeout: 1s, idleTimeout: 1m }"))
	hdWaitEvents(t, g, "rules loaded", 1) // loaded 2 times
	for _, want := range []string{"server.sendTimeout changed: it applies to connections and HTTP/2 streams opened from now on",
		"server.idleTimeout changed in the rules file: it takes effect at restart"} {
		if len(g.logs.Events(want)) != 1 {
			t.Errorf("no %q after the reload", want)
		}
	}

	reloaded := time.Now()
	scDialSlow(t, addr, "/big/after")
	poll(t, 10*time.Second, "the second slow reader holds a slot", func() bool {
		return hdConcurrency(t, g, "big") == 2
	})
	poll(t, 10*time.Second, "the second slow reader cut", func() bool {
		return hdConcurrency(t, g, "big") == 1
	})
	if took := time.Since(reloaded); took > 3*time.Second {
		t.Errorf("the reader on a new connection was cut %v after the reload, want about the new sendTimeout (1s)", took)
	}
	// The one connected before the reload still holds its slot, past the
	// new sendTimeout: its connection keeps 1h. The cut reader's upstream
	// call ends when the upstream's next write fails, a moment after the
	// gateway released its slot (later on a busy machine): wait for that.
	poll(t, 10*time.Second, "the cut reader's upstream call ended", func() bool {
		inFlight, _ := up.counts()
		return inFlight <= 1
	})
	if inFlight, _ := up.counts(); inFlight != 1 || hdConcurrency(t, g, "big") != 1 {
		t.Errorf("upstream in flight %d, concurrency %d; want the first reader's call still open", inFlight, hdConcurrency(t, g, "big"))
	}
}
