// Command upstreamd is an upstream for the e2e tests that must kill a target
// for real: a process serving 200 "ok from NAME" on a loopback address,
// which the tests stop with SIGKILL by its PID. It prints "listening ADDR"
// once it accepts connections.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to serve on")
	name := flag.String("name", "upstream", "name in the answers")
	flag.Parse()
	if !strings.HasPrefix(*listen, "127.") {
		fmt.Fprintln(os.Stderr, "upstreamd: serves loopback only")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstreamd:", err)
		os.Exit(1)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	srv := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "ok from "+*name)
		}),
	}
	_ = srv.Serve(ln)
}
