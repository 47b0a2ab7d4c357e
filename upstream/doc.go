// Package upstream chooses the target of each request to an upstream and
// keeps its targets' health: smooth weighted round robin, weighted
// least-request (two random choices) or consistent hashing; active health
// probes; passive ejection of targets that fail in a row; panic mode when no
// target is available; and a retry budget on the retries in flight.
//
// It knows nothing of routes or of how a request is forwarded: the proxy
// asks it for a target (Pick, then Retry for each further attempt, which the
// proxy makes only where that is safe) and reports every attempt's outcome
// back (Retry settles a failed one it replaces, Done the last). Its
// algorithms never read the clock: they take now, ns on the clock given in
// Options. Live state (health, ejections, in-flight
// counts) is held per upstream name and target URL by a Pool, so it
// survives reloads; the Pool also runs the probes, one goroutine per probed
// target.
//
// Layer 2 of docs/architecture.md: it imports only internal/ mechanisms (its
// counts are an internal/ring): neither config nor anything of limiter.
package upstream
