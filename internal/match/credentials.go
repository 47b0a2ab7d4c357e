package match

import (
	"encoding/base64"
	"strings"
)

// Credentials are the values a header source gives of an Authorization or
// Proxy-Authorization field (RFC 9110 11.4: an auth-scheme, then 1*SP and
// the credentials), one per way the servers behind may read them, as few
// as possible: one for every field a client would send unless it is
// hunting for spellings. dst is where they are appended.
//
// The scheme is case-insensitive and any run of spaces may follow it, so
// "bearer  sk-1" is "Bearer sk-1" to Go, Werkzeug and Express alike: the
// value spells a known scheme the registry's way (Basic, Bearer, ...), any
// other in lower case, with one space. A field of one word is kept as it
// is: it may be a bare API key, whose case matters.
//
// Basic's base64 is read as lenient decoders read it: Python's b64decode
// drops the bytes outside its alphabet and an '=' too early to be padding,
// Node's Buffer takes '-' and '_' for '+' and '/', and neither checks the
// bits the last character leaves over. Each reading gives the decoded bytes in
// standard base64 ("Basic YWxpY2U6cHc="), so every spelling of a user and
// password one of them accepts is counted as that user and password. A
// value a strict decoder refuses is still counted under what the lenient
// ones read: the client is held to the limit of the credentials it named.
//
// It allocates only for a field not spelt as its value.
func Credentials(dst []string, v string) []string {
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok {
		return append(dst, v)
	}
	for rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
		rest = rest[1:]
	}
	canon, a, b := schemeSpelling(scheme), rest, rest
	if canon == "Basic" {
		a, b = basicReadings(rest)
	}
	if a == rest && canon == scheme && len(scheme)+1+len(rest) == len(v) {
		return append(dst, v) // the common case, already in its form
	}
	dst = append(dst, canon+" "+a)
	if b != a {
		dst = append(dst, canon+" "+b)
	}
	return dst
}

// CredentialsForm is the value Credentials gives of v, as an item of a
// rule is written (the first, when lenient decoders read a Basic
// credential two ways).
func CredentialsForm(v string) string {
	var buf [2]string
	return Credentials(buf[:0], v)[0]
}

// schemes are the auth-schemes spelt as the IANA registry (or the
// service that made them common) spells them; the rest are lower-cased.
var schemes = [...]string{"Basic", "Bearer", "Digest", "Negotiate", "NTLM", "DPoP", "HOBA", "Mutual",
	"AWS4-HMAC-SHA256", "SCRAM-SHA-1", "SCRAM-SHA-256", "PrivateToken", "Concealed", "GNAP"}

func schemeSpelling(s string) string {
	for _, k := range schemes {
		if strings.EqualFold(s, k) {
			return k
		}
	}
	return lowerASCII(s)
}

// basicReadings are Basic's base64 as the lenient decoders read it (see
// Credentials), each written again in standard base64 with padding: a as
// Python's b64decode reads it (bytes outside the alphabet dropped, an '='
// before two characters of a quantum dropped, the data ending once padding
// completes a quantum), b as Node's Buffer does ('-' and '_' are '+' and
// '/'; it is b only when s holds one). a is s itself when s is so written.
func basicReadings(s string) (a, b string) {
	if canonicalBase64(s) {
		return s, s
	}
	a = reencode(s, false)
	if strings.ContainsAny(s, "-_") {
		return a, reencode(s, true)
	}
	return a, a
}

// canonicalBase64 reports whether s is standard base64 as an encoder
// writes it: only the alphabet, padded, the bits left over zero. It
// allocates nothing: most requests' credentials are so written.
func canonicalBase64(s string) bool {
	if len(s)%4 != 0 {
		return false
	}
	n, pad := len(s), 0
	for pad < 2 && n > 0 && s[n-1] == '=' {
		n--
		pad++
	}
	for i := 0; i < n; i++ {
		if strings.IndexByte(stdAlphabet, s[i]) < 0 {
			return false
		}
	}
	if n == 0 {
		return pad == 0
	}
	last := strings.IndexByte(stdAlphabet, s[n-1])
	switch pad {
	case 1:
		return last&0x03 == 0
	case 2:
		return last&0x0f == 0
	}
	return true
}

// reencode decodes s as a lenient decoder does (see basicReadings;
// urlsafe: Node's alphabet) and writes the bytes in standard base64. Where
// a strict decoder refuses s (no padding, a lone last character, leftover
// bits set), it reads what the lenient ones would.
func reencode(s string, urlsafe bool) string {
	keep := make([]byte, 0, len(s))
	pads := 0
scan:
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/':
		case urlsafe && c == '-':
			c = '+'
		case urlsafe && c == '_':
			c = '/'
		case c == '=':
			if q := len(keep) % 4; q >= 2 {
				if pads++; q+pads >= 4 {
					break scan
				}
			}
			continue
		default:
			continue
		}
		pads = 0
		keep = append(keep, c)
	}
	if len(keep)%4 == 1 {
		keep = keep[:len(keep)-1]
	}
	// Not Strict: the bits the last character leaves over are ignored.
	dec, err := base64.RawStdEncoding.DecodeString(string(keep))
	if err != nil {
		return string(keep) // cannot happen: only the alphabet is left
	}
	return base64.StdEncoding.EncodeToString(dec)
}

const stdAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
