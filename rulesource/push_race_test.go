package rulesource_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"sluice/rulesource"
)

// TestConcurrentPushesOneWins: sixteen pushes based on one version, at
// once: exactly one is stored and the version goes up by one; the others
// are refused (ErrConflict), never lost silently (SPEC §10).
func TestConcurrentPushesOneWins(t *testing.T) {
	c := client(t, sharedRedis)
	s := rulesource.New(c, testKey(t, c))
	ctx := ctxT(t)
	for round := int64(0); round < 5; round++ {
		var won, lost atomic.Int64
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := rulesource.New(c, s.Key()).Push(ctx, []byte(fmt.Sprintf("a: %d\n", i)), round)
				switch {
				case err == nil:
					won.Add(1)
				case errors.Is(err, rulesource.ErrConflict):
					lost.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if won.Load() != 1 || lost.Load() != 15 {
			t.Fatalf("round %d: %d won, %d lost", round, won.Load(), lost.Load())
		}
		if v, _ := s.Version(ctx); v != round+1 {
			t.Fatalf("version %d", v)
		}
	}
}
