package match

import (
	"encoding/base64"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestCredentials: every spelling of one credential that servers read as
// it is one value, and a field already in its form is kept as it is,
// without allocating.
func TestCredentials(t *testing.T) {
	alice := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:pw")) // YWxpY2U6cHc=
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"Bearer sk-1", []string{"Bearer sk-1"}},
		{"bearer sk-1", []string{"Bearer sk-1"}},
		{"BEARER  sk-1", []string{"Bearer sk-1"}},
		{"bEaReR \t sk-1", []string{"Bearer sk-1"}},
		{"Bearer sk-A", []string{"Bearer sk-A"}}, // the token's case is its own
		{"Token abc", []string{"token abc"}},
		{"token abc", []string{"token abc"}},
		{"sk-ABC", []string{"sk-ABC"}}, // one word: a bare key, as it is
		{"Basic YWxpY2U6cHc=", []string{alice}},
		{"basic YWxpY2U6cHc=", []string{alice}},
		{"BASIC   YWxpY2U6cHc=", []string{alice}},
		{"Basic YWxpY2U6cHc", []string{alice}},               // unpadded
		{"Basic YWxpY2U6cHd=", []string{alice}},              // leftover bits set
		{"Basic YWxp!Y2U6cHc=", []string{alice}},             // a byte outside the alphabet
		{"Basic YWxpY2U6cHc=junk", []string{alice}},          // after the padding
		{"Basic YWxp\r\nY2U6cHc=", []string{alice}},          // Go skips line ends
		{"Basic YWxpY2U6cHc=====", []string{alice}},          // more padding
		{"Basic Pz8_", []string{"Basic Pz8=", "Basic Pz8/"}}, // '_': dropped by Python, '/' to Node
		{"Basic ", []string{"Basic "}},
	} {
		if got := Credentials(nil, c.in); !slices.Equal(got, c.want) {
			t.Errorf("Credentials(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, v := range []string{"Bearer sk-1", "Basic YWxpY2U6cHc=", "sk-ABC", "token abc"} {
		buf := make([]string, 0, 2)
		if n := testing.AllocsPerRun(100, func() { _ = Credentials(buf[:0], v) }); n != 0 {
			t.Errorf("Credentials(%q) allocates %v times, want 0", v, n)
		}
	}
}

// TestCredentialsCoverDecoders: for random credentials spelt at random (a
// scheme in any case, runs of spaces, unpadded, leftover bits, bytes
// outside the alphabet, the URL-safe alphabet), whatever user and password
// a decoder reads is among the values: Go's net/http (Request.BasicAuth),
// Python's b64decode (Werkzeug's Authorization.from_header) and Node's
// Buffer.from(s, 'base64') (the basic-auth package).
func TestCredentialsCoverDecoders(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 20000 {
		raw := make([]byte, rng.IntN(12))
		for i := range raw {
			raw[i] = byte(rng.IntN(256))
		}
		enc := base64.StdEncoding.EncodeToString(raw)
		if rng.IntN(3) == 0 {
			enc = base64.URLEncoding.EncodeToString(raw)
		}
		var b strings.Builder
		for i := 0; i < len(enc); i++ {
			switch rng.IntN(12) {
			case 0:
				b.WriteByte("!.~-_*\r\n ="[rng.IntN(10)])
			case 1:
				if enc[i] == '=' {
					continue // unpadded
				}
			case 2:
				if i == len(enc)-1 || enc[i+1] == '=' {
					// the last data character, leftover bits set
					if k := strings.IndexByte(stdAlphabet, enc[i]); k >= 0 {
						b.WriteByte(stdAlphabet[k|0x03])
						continue
					}
				}
			}
			b.WriteByte(enc[i])
		}
		scheme := []string{"Basic", "basic", "BASIC", "bAsIc"}[rng.IntN(4)]
		field := scheme + []string{" ", "  ", " \t"}[rng.IntN(3)] + b.String()
		got := Credentials(nil, field)
		for _, d := range []struct {
			name string
			read func(string) ([]byte, bool)
		}{{"go", goBasic}, {"python", pythonBasic}, {"node", nodeBasic}} {
			user, ok := d.read(field)
			if !ok {
				continue
			}
			if want := "Basic " + base64.StdEncoding.EncodeToString(user); !slices.Contains(got, want) {
				t.Fatalf("%q: %s reads %q (%q), the values are %q", field, d.name, user, want, got)
			}
		}
	}
}

// goBasic is net/http's Request.BasicAuth, the credentials before the split.
func goBasic(field string) ([]byte, bool) {
	const prefix = "Basic "
	if len(field) < len(prefix) || !strings.EqualFold(field[:len(prefix)], prefix) {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(field[len(prefix):])
	return b, err == nil
}

// pythonBasic is Werkzeug's reading: the scheme up to the first space,
// case-insensitive, the rest stripped, b64decode without validation:
// bytes outside the alphabet dropped, data after the padding ignored, a
// length that padding cannot complete refused.
func pythonBasic(field string) ([]byte, bool) {
	scheme, rest, ok := strings.Cut(field, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return nil, false
	}
	rest = strings.Trim(rest, " \t")
	var keep []byte
	pad := 0
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch {
		case c == '=':
			if len(keep)%4 >= 2 {
				pad++
				if (len(keep)+pad)%4 == 0 {
					return decodeBits(keep)
				}
			}
		case strings.IndexByte(stdAlphabet, c) >= 0:
			if pad > 0 {
				pad = 0 // an '=' too early is dropped
			}
			keep = append(keep, c)
		}
	}
	if len(keep)%4 != 0 {
		return nil, false // Incorrect padding
	}
	return decodeBits(keep)
}

// nodeBasic is the basic-auth package: /^ *basic +([A-Za-z0-9._~+/-]+=*) *$/i,
// then Buffer.from(s, 'base64'): '-' and '_' are '+' and '/', padding
// optional, it stops at the first '='.
func nodeBasic(field string) ([]byte, bool) {
	f := strings.TrimLeft(field, " ")
	if len(f) < 6 || !strings.EqualFold(f[:5], "basic") || f[5] != ' ' {
		return nil, false
	}
	s := strings.TrimRight(strings.TrimLeft(f[5:], " "), " ")
	body := strings.TrimRight(s, "=")
	if body == "" || strings.Trim(body, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~+/-") != "" {
		return nil, false
	}
	var keep []byte
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch c {
		case '-':
			c = '+'
		case '_':
			c = '/'
		case '.', '~':
			continue
		}
		keep = append(keep, c)
	}
	if len(keep)%4 == 1 {
		keep = keep[:len(keep)-1]
	}
	return decodeBits(keep)
}

// decodeBits decodes unpadded standard base64, ignoring leftover bits.
func decodeBits(keep []byte) ([]byte, bool) {
	b, err := base64.RawStdEncoding.DecodeString(string(keep)) // not Strict: leftover bits ignored
	return b, err == nil
}
