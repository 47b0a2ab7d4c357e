package e2e

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// A strict parser of RFC 8941 (structured field values) Lists, as the
// RateLimit fields are written: the tests read the fields the way a client
// that follows the RFC does, so a field it would refuse fails the test.

// sfItem is one List member: a bare item and its parameters, in order.
type sfItem struct {
	value  any // int64, float64, string (sf-string), sfToken, []byte, bool
	params []sfParam
}

type sfParam struct {
	key   string
	value any
}

type sfToken string

// param returns the value of parameter key (nil: absent).
func (it sfItem) param(key string) any {
	for _, p := range it.params {
		if p.key == key {
			return p.value
		}
	}
	return nil
}

// parseSFList parses field lines as one List (RFC 8941 4.2: lines joined
// with ", ").
func parseSFList(lines []string) ([]sfItem, error) {
	p := &sfParser{s: strings.Join(lines, ", ")}
	p.ows(" ")
	var out []sfItem
	for p.i < len(p.s) {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.ows(" \t")
		if p.i == len(p.s) {
			return out, nil
		}
		if p.s[p.i] != ',' {
			return nil, p.errf("expected ',' after a member")
		}
		p.i++
		p.ows(" \t")
		if p.i == len(p.s) {
			return nil, p.errf("trailing ','")
		}
	}
	return out, nil
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) errf(format string, args ...any) error {
	return fmt.Errorf("sf: %q at %d: %s", p.s, p.i, fmt.Sprintf(format, args...))
}

func (p *sfParser) ows(set string) {
	for p.i < len(p.s) && strings.IndexByte(set, p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bare()
	if err != nil {
		return sfItem{}, err
	}
	it := sfItem{value: v}
	seen := map[string]bool{}
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.ows(" ")
		k, err := p.key()
		if err != nil {
			return sfItem{}, err
		}
		var pv any = true
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			if pv, err = p.bare(); err != nil {
				return sfItem{}, err
			}
		}
		if seen[k] { // RFC 8941 keeps the last; a RateLimit field has no business repeating one
			return sfItem{}, p.errf("parameter %q twice", k)
		}
		seen[k] = true
		it.params = append(it.params, sfParam{k, pv})
	}
	return it, nil
}

func (p *sfParser) key() (string, error) {
	start := p.i
	if p.i == len(p.s) || !(p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] == '*') {
		return "", p.errf("a key starts with lcalpha or '*'")
	}
	for p.i < len(p.s) && strings.IndexByte("abcdefghijklmnopqrstuvwxyz0123456789_-.*", p.s[p.i]) >= 0 {
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bare() (any, error) {
	if p.i == len(p.s) {
		return nil, p.errf("expected an item")
	}
	switch c := p.s[p.i]; {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		return p.str()
	case c == ':':
		return p.bytes()
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return p.s[p.i-1] == '1', nil
		}
		return nil, p.errf("bad boolean")
	case c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		start := p.i
		for p.i < len(p.s) && (strings.IndexByte("!#$%&'*+-.^_`|~:/", p.s[p.i]) >= 0 ||
			p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z') {
			p.i++
		}
		return sfToken(p.s[start:p.i]), nil
	}
	return nil, p.errf("not an item")
}

func (p *sfParser) number() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits, dot := 0, -1
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '.' && dot < 0 {
			dot = p.i
		} else if c < '0' || c > '9' {
			break
		}
		digits++
		p.i++
	}
	num := p.s[start:p.i]
	if dot < 0 {
		if digits == 0 || digits > 15 {
			return nil, p.errf("an integer has 1 to 15 digits")
		}
		return strconv.ParseInt(num, 10, 64)
	}
	if frac := p.i - dot - 1; frac < 1 || frac > 3 || dot-start > 12 {
		return nil, p.errf("a decimal has at most 12 digits, a '.', then 1 to 3")
	}
	return strconv.ParseFloat(num, 64)
}

func (p *sfParser) str() (any, error) {
	p.i++ // '"'
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.i == len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return nil, p.errf("bad escape")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return nil, p.errf("a string holds printable ASCII only")
		default:
			b.WriteByte(c)
		}
	}
	return nil, p.errf("unterminated string")
}

func (p *sfParser) bytes() (any, error) {
	p.i++ // ':'
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return nil, p.errf("unterminated byte sequence")
	}
	enc := p.s[p.i : p.i+end]
	p.i += end + 1
	b, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return nil, p.errf("byte sequence: %v", err)
	}
	return b, nil
}

// TestSFParser pins the parser on the RFC's own examples and refusals.
func TestSFParser(t *testing.T) {
	t.Parallel()
	good := map[string]int{
		`"burst";q=100;w=60,"daily";q=1000;w=86400`: 2,
		`"peruser";q=100;w=60;pk=:cHsdsRa894==:`:    -1, // not canonical base64: refused below
		`sugar, tea, rum`:                           3,
		`"a";r=0;t=1, "b";flag;x=?0;d=1.5`:          2,
	}
	for in, n := range good {
		got, err := parseSFList([]string{in})
		if n < 0 {
			if err == nil {
				t.Errorf("%s: parsed, want refused", in)
			}
			continue
		}
		if err != nil || len(got) != n {
			t.Errorf("%s: %d members, %v; want %d", in, len(got), err, n)
		}
	}
	for _, in := range []string{`"a";q=1,`, `"a" "b"`, `"a";Q=1`, `"a\x"`, `"a";q=1234567890123456`, `"é"`, `:abc:`} {
		if _, err := parseSFList([]string{in}); err == nil {
			t.Errorf("%s: parsed, want refused", in)
		}
	}
}
