package proxy_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"sluice/internal/h2test"
	"sluice/proxy"
)

// frames is n copies of one raw HTTP/2 frame of type typ on stream id.
func frames(n int, typ http2.FrameType, id uint32, payload []byte) []byte {
	var one [9]byte
	one[0], one[1], one[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	one[3] = byte(typ)
	binary.BigEndian.PutUint32(one[5:], id)
	f := append(one[:], payload...)
	return bytes.Repeat(f, n)
}

// An HTTP/2 client that sends frames no request is made of (a header
// block it never ends, frames of unknown types, PINGs) has Go's server
// read and answer each, for about a core, for as long as idleTimeout lets
// the connection stay. The gateway closes a connection that reads over 8
// MiB while none of its requests is being served, counted as a flood; a
// client whose bytes are requests' bodies (a 20 MiB upload over h2, and
// over HTTP/1.1) is served.
func TestFloodsCloseTheConnection(t *testing.T) {
	unknown := make([]byte, 16<<10) // a frame type no one knows: ignored, its payload read
	for _, tc := range []struct {
		name  string
		start func(c *h2test.Conn) (uint32, error)
		flood func(id uint32) []byte
	}{
		{"a header block never ended, empty CONTINUATION frames", func(c *h2test.Conn) (uint32, error) { return c.Open(resetFields) },
			func(id uint32) []byte { return frames(7000, http2.FrameContinuation, id, nil) }},
		{"frames of an unknown type", func(*h2test.Conn) (uint32, error) { return 0, nil },
			func(uint32) []byte { return frames(4, http2.FrameType(0xbb), 0, unknown) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, refused := gatewayCounting(t, nil, "")
			before := refused(proxy.RefusedFlood)
			c, err := h2test.Dial(addr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ended := make(chan error, 1)
			go func() { ended <- c.Drain() }()
			id, err := tc.start(c)
			if err != nil {
				t.Fatal(err)
			}
			batch := tc.flood(id)
			sent := 0
			for sent < 64<<20 {
				_ = c.Raw().SetWriteDeadline(time.Now().Add(5 * time.Second))
				n, err := c.Raw().Write(batch)
				sent += n
				if err != nil {
					break
				}
			}
			closedByGateway(t, ended, fmt.Sprintf("%d bytes of flood", sent))
			if n := refused(proxy.RefusedFlood) - before; n != 1 {
				t.Fatalf("%d connections closed for a flood, want 1", n)
			}
			// 8 MiB, and what the sockets' buffers took before the close.
			if sent > 32<<20 {
				t.Errorf("%d bytes of flood were taken before the close, want about 8 MiB", sent)
			}
		})
	}

	t.Run("uploads are no flood", func(t *testing.T) {
		addr, refused := gatewayCounting(t, nil, "")
		before := refused(proxy.RefusedFlood)
		body := make([]byte, 20<<20)
		rand.Read(body)
		for _, h2 := range []bool{true, false} {
			tr := &http.Transport{Protocols: new(http.Protocols)}
			if h2 {
				tr.Protocols.SetUnencryptedHTTP2(true)
			} else {
				tr.Protocols.SetHTTP1(true)
			}
			resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Post("http://"+addr+"/count", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Fatalf("h2 %v: %v", h2, err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			tr.CloseIdleConnections()
			if resp.StatusCode != 200 || string(got) != fmt.Sprint(len(body)) {
				t.Fatalf("h2 %v: a 20 MiB upload answered %d %q, want 200 and its length", h2, resp.StatusCode, got)
			}
		}
		if n := refused(proxy.RefusedFlood) - before; n != 0 {
			t.Fatalf("%d connections closed for a flood, want none", n)
		}
	})
}
