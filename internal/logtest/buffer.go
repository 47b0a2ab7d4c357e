// Package logtest collects the JSON log lines a component writes while a
// test reads them.
package logtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// Buffer is a log sink safe for the goroutines that write to it while the
// test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Events returns the log events whose message contains msg, in order.
func (l *Buffer) Events(msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if m, _ := ev["message"].(string); strings.Contains(m, msg) {
			out = append(out, ev)
		}
	}
	return out
}

// Find returns the (skip+1)-th event whose message contains msg, or nil.
func (l *Buffer) Find(msg string, skip int) map[string]any {
	evs := l.Events(msg)
	if len(evs) > skip {
		return evs[skip]
	}
	return nil
}
