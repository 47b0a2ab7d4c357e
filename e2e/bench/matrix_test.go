package main

import (
	"slices"
	"testing"
	"time"
)

// The run's deadline comes from matrixRuns: it must count the runs the
// matrix makes, or a paced run is cut short (or waits too long to stop).
func TestMatrixRunsCountsTheProtocolsRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         options
		protocols []string
	}{
		{"all", options{all: true}, []string{"HTTP/1.1", "HTTPS/1.1", "h2"}},
		{"edge", options{edge: true}, []string{"HTTPS/1.1", "h2"}},
		{"all paced", options{all: true, pace: 4 * time.Millisecond}, []string{"HTTP/1.1", "HTTPS/1.1"}},
		{"edge paced", options{edge: true, pace: 4 * time.Millisecond}, []string{"HTTPS/1.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := matrixProtocols(tc.o, "wrk", "h2load")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range ps {
				names = append(names, p.name)
			}
			if !slices.Equal(names, tc.protocols) {
				t.Fatalf("protocols %v, want %v", names, tc.protocols)
			}
			// sluice, floor, proxy-floor, nginx, caddy on each protocol;
			// the fasthttp floor once, over HTTP/1.1.
			want := 5 * len(ps)
			if !tc.o.edge {
				want++
			}
			if got := matrixRuns(tc.o, true, true); got != want {
				t.Errorf("matrixRuns = %d, want %d", got, want)
			}
		})
	}
}
