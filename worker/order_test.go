package worker_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// TestOrderAndExclusivity runs a Pool over domains whose offsets are
// submitted by producers that also redeliver some, with a handler that
// fails at random, panics, and now and then takes long enough that its
// lease must be renewed. Every domain's attempts must run one at a time
// under growing fences, and its offsets succeed in order, each once,
// whatever the failures: the handler fails no offset more often than it
// has retries, so that none becomes a dead letter.
func TestOrderAndExclusivity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ttl  time.Duration // zero: leases never expire
	}{
		{name: "no-ttl"},
		// Leases last a second: long enough that no lease expires however
		// late a renewal runs on a loaded machine, so that the checks of
		// exclusivity hold (a lost lease would void them).
		{name: "ttl", ttl: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			runOrder(t, seed, tc.ttl)
		})
	}
}

func runOrder(t *testing.T, seed uint64, ttl time.Duration) {
	const maxRetries = 2
	domains, offsets := 24, 40
	if testing.Short() {
		domains, offsets = 8, 20
	}
	rec := newRecorder()
	opts := []worklease.Option{worklease.WithMaxRetries(maxRetries), worklease.WithObserver(rec)}
	if ttl > 0 {
		opts = append(opts, worklease.WithLeaseTTL(ttl))
	}
	m := newManager(t, opts...)
	s := newStore()
	// fate decides an attempt's outcome from the seed, the offset and the
	// attempt, whichever worker runs it.
	fate := func(j worker.Job) uint64 {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%s/%d/%d", seed, j.Domain, j.Offset, j.Attempt)
		return h.Sum64() % 100
	}
	slow := 0 // slow attempts so far: a few, so that the test stays quick
	var slowMu sync.Mutex
	takeSlow := func() bool {
		slowMu.Lock()
		defer slowMu.Unlock()
		if slow == 6 {
			return false
		}
		slow++
		return true
	}
	h := func(ctx context.Context, j worker.Job) error {
		s.begin(j)
		if want := fmt.Sprintf("%s/%d", j.Domain, j.Offset); string(j.Payload) != want {
			s.end(j, false)
			return fmt.Errorf("payload %q, want %q", j.Payload, want)
		}
		f := fate(j)
		switch {
		case f < 15 && j.Attempt <= maxRetries:
			s.end(j, false)
			return errors.New("flaky")
		case f < 20 && j.Attempt <= maxRetries:
			s.end(j, false)
			panic("boom")
		case f < 22 && ttl > 0 && takeSlow():
			select { // long enough for a renewal or two
			case <-time.After(ttl * 2 / 3):
			case <-ctx.Done():
				s.end(j, false)
				return context.Cause(ctx)
			}
		case f < 60:
			time.Sleep(time.Duration(f) * time.Microsecond)
		}
		s.end(j, true)
		return nil
	}
	p := start(t, m.Backend(), h, worker.WithWorkers(8), worker.WithBackoff(fastBackoff), worker.WithQueueLimit(domains*offsets/4))

	ctx := context.Background()
	var producers sync.WaitGroup
	for g := range 4 {
		producers.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for off := range int64(offsets) {
				for d := g; d < domains; d += 4 {
					dom := fmt.Sprintf("d%d", d)
					payload := []byte(fmt.Sprintf("%s/%d", dom, off))
					_, err := p.Submit(ctx, dom, off, payload)
					if err != nil {
						t.Errorf("Submit(%s, %d): %v", dom, off, err)
						return
					}
					if again := off - int64(r.IntN(3)); r.IntN(10) == 0 && again >= 0 { // a redelivery
						st, err := p.Submit(ctx, dom, again, []byte(fmt.Sprintf("%s/%d", dom, again)))
						if err != nil || st == worklease.AlreadyFailed {
							t.Errorf("Submit(%s, %d) again: %v, %v", dom, again, st, err)
							return
						}
					}
				}
			}
		})
	}
	producers.Wait()
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "every offset submitted finished")
	require.NoError(t, p.stop(t))
	s.check(t)

	want := make([]int64, offsets)
	for i := range want {
		want[i] = int64(i)
	}
	for d := range domains {
		dom := fmt.Sprintf("d%d", d)
		require.Equal(t, want, s.appliedOf(dom), "%s: offsets applied", dom)
		info, err := m.Inspect(dom)
		require.NoError(t, err)
		require.Equal(t, worklease.DomainInfo{Processed: int64(offsets)}, info, "%s", dom)
	}
	dead, err := m.DeadLetters("")
	require.NoError(t, err)
	require.Empty(t, dead)
	st := p.Stats()
	require.Equal(t, uint64(domains*offsets), st.Succeeded)
	require.NotZero(t, st.Retried)
	require.NotZero(t, st.Panicked)
	require.Zero(t, st.LeaseLost, "a lease was lost: the checks of exclusivity above do not hold then")
	require.Zero(t, st.Errors)
	require.Zero(t, st.Queued)
	if ttl > 0 && slow > 0 {
		require.NotZero(t, rec.count(worklease.EventExtended), "%d slow attempts, and no renewal", slow)
	}
}
