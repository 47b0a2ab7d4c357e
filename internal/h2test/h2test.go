// Package h2test speaks HTTP/2 to a server frame by frame, as a hostile
// client does: it sends the header fields it is given, pseudo-header fields
// included, in the order and with the bytes given, where Go's
// http2.Transport would refuse or correct them (a :method holding a space, a
// :path with a '#', two content-length fields, a connection field, a host
// field that is not the :authority). The proxy's tests send such requests
// to the gateway over h2c (prior knowledge) and over TLS (ALPN h2).
package h2test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Timeout bounds Dial and each Do: a server that stops answering fails the
// test's request instead of hanging it.
const Timeout = 10 * time.Second

// frameMax is the largest frame payload a peer must accept (RFC 9113
// 4.2, SETTINGS_MAX_FRAME_SIZE's initial value): longer header blocks go on
// in CONTINUATION frames, longer bodies in more DATA frames.
const frameMax = 16384

// ErrUnprocessed is Do's error for a stream the server did not process
// (RFC 9113 8.7): refused (REFUSED_STREAM), or above the last stream a
// GOAWAY names. The request can be sent again, on a new connection if the
// server is going away.
var ErrUnprocessed = errors.New("h2test: the server did not process the stream")

// Conn is one HTTP/2 connection on which requests are sent one at a time,
// each on a new stream. After Do reports an error the connection is of no
// more use: Close it and Dial again. Not safe for concurrent use.
type Conn struct {
	nc  net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer
	id  uint32 // the last stream opened
	err error  // why no more stream can be opened
}

// Answer is how the server answered one request.
type Answer struct {
	Status string // :status, "" when no answer's headers came
	Body   []byte
	// Reset: the stream was reset (RST_STREAM), or the connection ended,
	// before the answer did; Status may still hold what came first.
	Reset bool
}

// Dial opens an h2c connection (prior knowledge) to addr, or with tc set a
// TLS one negotiating h2 by ALPN, and sends the preface and SETTINGS.
func Dial(addr string, tc *tls.Config) (*Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, Timeout)
	if err != nil {
		return nil, fmt.Errorf("h2test: %w", err)
	}
	_ = nc.SetDeadline(time.Now().Add(Timeout))
	if tc != nil {
		tc = tc.Clone()
		tc.NextProtos = []string{http2.NextProtoTLS}
		tl := tls.Client(nc, tc)
		if err := tl.Handshake(); err != nil {
			nc.Close()
			return nil, fmt.Errorf("h2test: TLS handshake: %w", err)
		}
		if p := tl.ConnectionState().NegotiatedProtocol; p != http2.NextProtoTLS {
			nc.Close()
			return nil, fmt.Errorf("h2test: the server chose ALPN %q, not h2", p)
		}
		nc = tl
	}
	c := &Conn{nc: nc, fr: http2.NewFramer(nc, nc)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.enc = hpack.NewEncoder(&c.hb)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		nc.Close()
		return nil, fmt.Errorf("h2test: preface: %w", err)
	}
	if err := c.fr.WriteSettings(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("h2test: settings: %w", err)
	}
	return c, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Request is one request as a hostile client writes it.
type Request struct {
	// Fields are the header fields, pseudo-header fields included, sent as
	// given, in order, in a HEADERS frame (and CONTINUATION frames).
	Fields [][2]string
	// Fragment, if set, is the most bytes of the header block a frame
	// carries (else the largest frame payload): a small one cuts fields
	// across a HEADERS frame and CONTINUATION frames, as a peer may.
	Fragment int
	// Data are the payloads of the DATA frames that follow (a payload past
	// the largest frame size is cut into more), the last one ending the
	// stream; with none, the HEADERS frame ends it.
	Data [][]byte
	// Before, if set, is called before each DATA frame i is sent: a client
	// whose body comes late. If it returns false, that frame and the rest
	// are not sent and the stream is left open: a client that never ends
	// its request. (Frames the server sends meanwhile wait in the
	// connection.)
	Before func(i int) bool
}

// Do sends fields and then body (nil: none, the stream ends with its
// headers) in one DATA frame, as Send does.
func (c *Conn) Do(fields [][2]string, body []byte) (Answer, error) {
	q := Request{Fields: fields}
	if body != nil {
		q.Data = [][]byte{body}
	}
	return c.Send(q)
}

// Send sends q on a new stream, waits until the answer ends (or the stream
// is reset) and returns it. An error means the connection is of no more
// use (but for a REFUSED_STREAM, also ErrUnprocessed); the answer says
// what came on it before.
func (c *Conn) Send(q Request) (Answer, error) {
	if c.err != nil {
		return Answer{Reset: true}, c.err
	}
	_ = c.nc.SetDeadline(time.Now().Add(Timeout))
	id := c.nextStream()
	if err := c.send(id, q); err != nil {
		c.err = fmt.Errorf("h2test: writing stream %d: %w", id, err)
		return Answer{Reset: true}, c.err
	}
	var a Answer
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if c.err == nil {
				c.err = fmt.Errorf("h2test: reading stream %d: %w", id, err)
			}
			a.Reset = true
			return a, c.err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = c.fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			// No new stream; this one may still be answered if the server
			// took it, or the connection closes.
			if f.LastStreamID < id {
				c.err = fmt.Errorf("%w: GOAWAY %v after stream %d", ErrUnprocessed, f.ErrCode, f.LastStreamID)
				a.Reset = true
				return a, c.err
			}
			c.err = fmt.Errorf("h2test: GOAWAY %v", f.ErrCode)
		case *http2.MetaHeadersFrame:
			if f.StreamID == id {
				// The final status; an interim one (100 Continue) is
				// followed by it, trailers have none.
				if st := f.PseudoValue("status"); st != "" && (a.Status == "" || a.Status[0] == '1') {
					a.Status = st
				}
				if f.StreamEnded() {
					return a, c.err
				}
			}
		case *http2.DataFrame:
			// Every byte is taken at once: the server's windows are given
			// back, so no number of answers on one connection stalls it.
			if n := uint32(len(f.Data())); n > 0 {
				err = c.fr.WriteWindowUpdate(0, n)
				if err == nil && f.StreamID == id && !f.StreamEnded() {
					err = c.fr.WriteWindowUpdate(id, n)
				}
			}
			if f.StreamID == id {
				a.Body = append(a.Body, f.Data()...)
				if f.StreamEnded() {
					return a, c.err
				}
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				a.Reset = true
				if f.ErrCode == http2.ErrCodeRefusedStream && a.Status == "" {
					return a, fmt.Errorf("%w: REFUSED_STREAM", ErrUnprocessed)
				}
				return a, c.err
			}
		}
		if err != nil {
			c.err = fmt.Errorf("h2test: writing on stream %d: %w", id, err)
			a.Reset = true
			return a, c.err
		}
	}
}

// nextStream is the id of the connection's next client stream (odd,
// rising).
func (c *Conn) nextStream() uint32 {
	c.id += 2
	if c.id == 2 {
		c.id = 1
	}
	return c.id
}

// encode is fields' header block, HPACK-encoded on the connection's
// encoder (valid until the next encode).
func (c *Conn) encode(fields [][2]string) ([]byte, error) {
	c.hb.Reset()
	for _, f := range fields {
		if err := c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return nil, err
		}
	}
	return c.hb.Bytes(), nil
}

func (c *Conn) send(id uint32, q Request) error {
	block, err := c.encode(q.Fields)
	if err != nil {
		return err
	}
	size := frameMax
	if q.Fragment > 0 {
		size = min(q.Fragment, frameMax)
	}
	first := block[:min(len(block), size)]
	block = block[len(first):]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
		EndHeaders: len(block) == 0, EndStream: len(q.Data) == 0}); err != nil {
		return err
	}
	for len(block) > 0 {
		part := block[:min(len(block), size)]
		block = block[len(part):]
		if err := c.fr.WriteContinuation(id, len(block) == 0, part); err != nil {
			return err
		}
	}
	for i, data := range q.Data {
		if q.Before != nil {
			if !q.Before(i) {
				return nil
			}
			_ = c.nc.SetDeadline(time.Now().Add(Timeout))
		}
		last := i == len(q.Data)-1
		for {
			part := data[:min(len(data), frameMax)]
			data = data[len(part):]
			if err := c.fr.WriteData(id, last && len(data) == 0, part); err != nil {
				return err
			}
			if len(data) == 0 {
				break
			}
		}
	}
	return nil
}

// Abandon sends fields on a new stream, its request complete, then resets
// the stream (RST_STREAM, CANCEL) at once, as a rapid-reset client does;
// with provoke it has the server reset it instead, by a WINDOW_UPDATE of
// 0 on the stream, a stream error (RFC 9113 6.9; "MadeYouReset"). It reads
// nothing: the server's frames wait in the connection for Drain.
func (c *Conn) Abandon(fields [][2]string, provoke bool) error {
	c.nextStream()
	if err := c.send(c.id, Request{Fields: fields}); err != nil {
		return err
	}
	if provoke {
		c.fr.AllowIllegalWrites = true
		defer func() { c.fr.AllowIllegalWrites = false }()
		return c.fr.WriteWindowUpdate(c.id, 0)
	}
	return c.fr.WriteRSTStream(c.id, http2.ErrCodeCancel)
}

// Open sends fields on a new stream as a HEADERS frame that does not end
// the header block, and returns the stream's id: the server waits for its
// CONTINUATION frames, which a test then writes raw (Raw).
func (c *Conn) Open(fields [][2]string) (uint32, error) {
	id := c.nextStream()
	block, err := c.encode(fields)
	if err != nil {
		return 0, err
	}
	return id, c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true})
}

// Raw is the connection, for frames a test writes as bytes (a flood).
func (c *Conn) Raw() net.Conn { return c.nc }

// Drain reads and drops the server's frames until the connection ends or
// the server sends GOAWAY, and returns why: io.EOF, a reset, a
// *http2.GoAwayFrame's error code as an http2.ConnectionError, or the
// deadline (Timeout).
func (c *Conn) Drain() error {
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(Timeout))
		f, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			return http2.ConnectionError(ga.ErrCode)
		}
	}
}

// Call sends one request on a new h2c connection to addr (Conn.Do) and
// returns the :status, or "reset" if none came before the stream or the
// connection was reset or closed.
func Call(tb testing.TB, addr string, fields [][2]string, body []byte) string {
	tb.Helper()
	c, err := Dial(addr, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	a, _ := c.Do(fields, body)
	if a.Status == "" {
		return "reset"
	}
	return a.Status
}
