package proxy

import (
	"net/http"
)

// Short JSON bodies for answers the gateway gives itself (not the upstream's).
var (
	bodyNotFound      = []byte(`{"error":"no route"}` + "\n")
	bodyNotAllowed    = []byte(`{"error":"method not allowed"}` + "\n")
	bodyBadGateway    = []byte(`{"error":"upstream unreachable"}` + "\n")
	bodyBadUpgrade    = []byte(`{"error":"upstream did not accept the WebSocket handshake"}` + "\n")
	bodyTimeout       = []byte(`{"error":"upstream timeout"}` + "\n")
	bodyUnavailable   = []byte(`{"error":"no rules loaded"}` + "\n")
	bodyBadBody       = []byte(`{"error":"bad request body"}` + "\n")
	bodyClientTimeout = []byte(`{"error":"request body timeout"}` + "\n")
	bodyBadPath       = []byte(`{"error":"bad request path"}` + "\n")
	bodyAmbiguous     = []byte(`{"error":"several values where one is expected"}` + "\n")
	bodyTooManyValues = []byte(`{"error":"more than 16 values of one parameter"}` + "\n")
	bodyTooLarge      = []byte(`{"error":"request body too large"}` + "\n")
)

// badTargetBodies answer a target readTarget refuses, by its reason.
var badTargetBodies = [...][]byte{
	badFragment:    []byte(`{"error":"bad request target","reason":"fragment"}` + "\n"),
	badForm:        []byte(`{"error":"bad request target","reason":"not a path"}` + "\n"),
	badDot:         bodyBadPath,
	badEscape:      []byte(`{"error":"bad request path","reason":"malformed escape"}` + "\n"),
	badQuery:       []byte(`{"error":"bad request query","reason":"';', a malformed escape or over 10000 parameters"}` + "\n"),
	badHost:        []byte(`{"error":"bad request host","reason":"not a host name or address"}` + "\n"),
	badParam:       []byte(`{"error":"bad request path","reason":"path parameter (';')"}` + "\n"),
	badMethod:      []byte(`{"error":"bad request method","reason":"a standard method in another case"}` + "\n"),
	badMethodToken: []byte(`{"error":"bad request method","reason":"not a token"}` + "\n"),
	badLength:      []byte(`{"error":"bad request","reason":"content-length is not the body's length"}` + "\n"),
	badSlash:       []byte(`{"error":"bad request path","reason":"escaped slash (%2F or %5C)"}` + "\n"),
	badConnect:     []byte(`{"error":"method not allowed","reason":"CONNECT: the gateway opens no tunnels"}` + "\n"),
	badLongPath:    []byte(`{"error":"URI too long","reason":"a path over 8192 bytes"}` + "\n"),
	badMisdirected: []byte(`{"error":"misdirected request","reason":"the Host is not the TLS server name (SNI) of the connection"}` + "\n"),
}

// badTargetStatus is the status of a target readTarget refuses: 400, but
// 405 for CONNECT and 414 for a path too long (as nginx answers them), and
// 421 for a Host that is not the SNI under tls.strictSni (as Caddy's
// strict_sni_host does).
func badTargetStatus(bad int) int {
	switch bad {
	case badMisdirected:
		return http.StatusMisdirectedRequest
	case badConnect:
		return http.StatusMethodNotAllowed
	case badLongPath:
		return http.StatusRequestURITooLong
	}
	return http.StatusBadRequest
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h["X-Content-Type-Options"] = nosniff
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Header values shared by every response: net/http only reads them.
var (
	contentTypeJSON = []string{"application/json"}
	nosniff         = []string{"nosniff"}
)

func notFound(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusNotFound, bodyNotFound)
}

func notAllowed(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusMethodNotAllowed, bodyNotAllowed)
}
