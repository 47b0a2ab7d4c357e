package upstream_test

import (
	"fmt"

	"sluice/upstream"
)

// A request picks a target, may be retried elsewhere, and reports each
// attempt; the clock is the caller's.
func ExamplePool() {
	now := int64(0)
	p := upstream.NewPool(upstream.Options{Now: func() int64 { return now }})
	defer p.Close()
	u, err := p.Build("orders", upstream.Spec{
		Targets: []upstream.Target{{URL: "http://10.0.0.1:9001", Weight: 1}, {URL: "http://10.0.0.2:9001", Weight: 3}},
		Retries: 1, RetryBudget: 0.2,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p.Commit([]*upstream.Upstream{u})

	var tries upstream.Tries
	i := u.Pick(now, 0, false, &tries)
	if j := u.Retry(now, 0, false, &tries, 503); j >= 0 { // the target answered 503: try another
		u.Done(now, &tries, 200, upstream.Success)
		fmt.Println(u.URL(i).Host, "then", u.URL(j).Host)
	} else {
		u.Done(now, &tries, 503, upstream.Failure) // no retry: the client gets the 503
	}
	// Output: 10.0.0.2:9001 then 10.0.0.1:9001
}
