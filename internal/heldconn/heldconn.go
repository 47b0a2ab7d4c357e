// Package heldconn is, for tests, a socket that can keep its writes and
// send them in one: what a TLS peer writes in between (several records, a
// close_notify) reaches the other end in one segment, and so in one read.
// The proxy's probe tests and e2e's TLS upstream both need that case.
package heldconn

import (
	"bytes"
	"net"
)

// Conn is a net.Conn whose writes go out as they come, or, between Hold
// and Send, are kept. Hold, Send and the writes they frame belong to one
// goroutine.
type Conn struct {
	net.Conn
	held *bytes.Buffer // nil: writes go out as they come
}

func (c *Conn) Write(b []byte) (int, error) {
	if c.held != nil {
		return c.held.Write(b)
	}
	return c.Conn.Write(b)
}

// Hold keeps the writes that follow, until Send.
func (c *Conn) Hold() { c.held = new(bytes.Buffer) }

// Send writes what was kept since Hold in one write, and lets the writes
// that follow go out as they come.
func (c *Conn) Send() error {
	b := c.held
	c.held = nil
	_, err := c.Conn.Write(b.Bytes())
	return err
}

// Listener accepts Conns.
type Listener struct{ net.Listener }

func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c}, nil
}
