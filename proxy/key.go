package proxy

import (
	"unsafe"

	"sluice/config"
)

// maxKeyBuf is the most bytes of joined values an exchange keeps between
// requests; a request whose composite values needed more (long headers)
// leaves its buffer to the collector.
const maxKeyBuf = 4 << 10

// joined holds the values of a composite key for one request: every
// combination of one value of each source (SPEC §3 Sources: Composite keys,
// Several values), each joined by config.AppendJoined into buf. It lives in
// the pooled exchange and keeps buf across requests, so joining allocates
// nothing once buf has grown to the values' size.
type joined struct {
	buf []byte
	// spans are the combinations built so far: [start, end) in buf.
	spans [maxValues][2]int32
	n     int
}

// values reads the values of a composite key k for the request of e. It
// builds the cartesian product of its sources' distinct non-empty values,
// source by source: none when a source has none (the request lacks it),
// and ok false when a source has more than maxValues values or the
// combinations would be more than maxValues (the request is answered 400,
// as for too many values of one source: checking only some would let a
// value hide behind decoys). The result is written into e.vals, whose
// strings alias j.buf until the next call.
func (j *joined) values(e *exchange, k config.Key) (vals []string, ok bool) {
	j.buf, j.n = j.buf[:0], 0
	for i, src := range k {
		if !e.src.values(e.req, &e.view, e.params, src, &e.vals) {
			return nil, false
		}
		parts := e.vals.list()
		if len(parts) == 0 {
			return nil, true
		}
		if i == 0 {
			for _, v := range parts {
				start := len(j.buf)
				j.buf = config.AppendJoined(j.buf, v, true)
				j.spans[j.n] = [2]int32{int32(start), int32(len(j.buf))}
				j.n++
			}
			continue
		}
		if j.n*len(parts) > maxValues {
			return nil, false
		}
		// Each combination so far, extended by each value of this source;
		// the new combinations are appended after the old ones, then take
		// their place in spans.
		var next [maxValues][2]int32
		m := 0
		for _, sp := range j.spans[:j.n] {
			for _, v := range parts {
				start := len(j.buf)
				j.buf = append(j.buf, j.buf[sp[0]:sp[1]]...)
				j.buf = config.AppendJoined(j.buf, v, false)
				next[m] = [2]int32{int32(start), int32(len(j.buf))}
				m++
			}
		}
		j.spans, j.n = next, m
	}
	// Only now is buf final: the strings may point into it.
	e.vals.n, e.vals.over = j.n, false
	for i, sp := range j.spans[:j.n] {
		e.vals.v[i] = unsafe.String(&j.buf[sp[0]], int(sp[1]-sp[0]))
	}
	return e.vals.list(), true
}

// reset empties j for the next request, keeping a buffer of reasonable size.
func (j *joined) reset() {
	if cap(j.buf) > maxKeyBuf {
		j.buf = nil
	}
	j.buf, j.n = j.buf[:0], 0
}
