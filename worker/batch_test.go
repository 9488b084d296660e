package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/worker"
)

// A batching backend notes the size of each batch call the Pool makes,
// can hold the first ClaimNext until released, and can lose the answer of
// the first ClaimNext of more than one claim, as over a network.
type batching struct {
	worklease.Backend
	hold chan struct{} // if not nil, the first ClaimNext waits until it is closed
	lose bool          // lose the answer of the first ClaimNext of two claims or more

	mu      sync.Mutex       // guards the fields below
	held    bool             // the first ClaimNext came
	lost    []string         // the claims of the batch whose answer was lost
	batches map[string][]int // the sizes of each call's batches, by call
}

func newBatching(b worklease.Backend) *batching {
	return &batching{Backend: b, batches: map[string][]int{}}
}

func (b *batching) note(call string, n int) (first bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches[call] = append(b.batches[call], n)
	first = call == "ClaimNext" && !b.held
	if first {
		b.held = true
	}
	return first
}

func (b *batching) sizes(call string) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.batches[call]...)
}

func (b *batching) ClaimNext(ctx context.Context, cs []worklease.Claim) ([]worklease.Claim, []error, error) {
	if b.note("ClaimNext", len(cs)) && b.hold != nil {
		<-b.hold
	}
	next, errs, err := b.Backend.ClaimNext(ctx, cs)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lose && b.lost == nil && len(cs) > 1 {
		b.lost = claimNames(cs)
		return nil, nil, errLossy
	}
	return next, errs, err
}

func (b *batching) ExtendMany(ctx context.Context, cs []worklease.Claim, d time.Duration) ([]time.Time, []error, error) {
	b.note("ExtendMany", len(cs))
	return b.Backend.ExtendMany(ctx, cs, d)
}

func claimNames(cs []worklease.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Domain
	}
	return out
}

// holdEnds ends the attempts of n handlers, which h runs, with nil at
// once, and waits until the first worker's ClaimNext, which b holds, is
// under way and the others wait for the next call; then it releases b's
// hold, so that the others end together.
func holdEnds(t *testing.T, p *running, b *batching, results chan error, n int) {
	t.Helper()
	for range n {
		results <- nil
	}
	eventually(t, func() bool { return worker.PendingEnds(p.Pool) == n-1 }, "the ends waiting")
	close(b.hold)
}

// A batch of ends whose answer was lost is made again, for each of its
// workers, and the backend answers each claim as the first call did: no
// offset is lost, run twice or out of order, and the failed call counts
// as one error.
func TestBatchAnswerLost(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	b := newBatching(m.Backend())
	b.hold, b.lose = make(chan struct{}), true
	s := newStore()
	h, started, results := gated()
	var n atomic.Int32
	p := start(t, b, func(ctx context.Context, j worker.Job) error {
		s.begin(j)
		var err error
		if n.Add(1) <= 3 { // the first of each domain waits to be told
			err = h(ctx, j)
		}
		s.end(j, err == nil)
		return err
	}, worker.WithWorkers(3), worker.WithBackoff(fastBackoff), worker.WithEndBatches(1, 16))
	domains := []string{"a", "b", "c"}
	for _, d := range domains {
		for off := range int64(3) {
			_, err := p.Submit(context.Background(), d, off, nil)
			require.NoError(t, err)
		}
	}
	for range domains {
		<-started
	}
	holdEnds(t, p, b, results, len(domains))
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "all processed")
	s.check(t)
	for _, d := range domains {
		require.Equal(t, []int64{0, 1, 2}, s.appliedOf(d), "%s's offsets", d)
	}
	b.mu.Lock()
	require.GreaterOrEqual(t, len(b.lost), 2, "the lost batch: the ends that waited (and a next one, perhaps)")
	b.mu.Unlock()
	st := p.Stats()
	require.Equal(t, uint64(9), st.Succeeded)
	require.Zero(t, st.LeaseLost)
	require.Equal(t, uint64(1), st.Errors, "a lost batch is one failed call")
}

// A batch of ends with one stale lease in it: the backend refuses that
// claim alone, which the Pool reports as a lost lease, and ends the
// others; the stale lease's offset runs again.
func TestBatchWithStaleLease(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	b := newBatching(m.Backend())
	b.hold = make(chan struct{})
	rec := newRecorder(worklease.EventLeaseLost)
	h, started, results := gated()
	p := start(t, b, h, worker.WithWorkers(3), worker.WithBackoff(fastBackoff), worker.WithEndBatches(1, 16),
		worker.WithObserver(rec))
	domains := []string{"a", "b", "c"}
	for _, d := range domains {
		_, err := p.Submit(context.Background(), d, 1, nil)
		require.NoError(t, err)
	}
	for range domains {
		<-started
	}
	_, err := m.ForceRelease("b") // an operator takes b's lease while its handler runs
	require.NoError(t, err)
	holdEnds(t, p, b, results, len(domains))
	lost := rec.next(t, worklease.EventLeaseLost)
	require.Equal(t, "b", lost.Domain)
	require.ErrorIs(t, lost.Cause, worklease.ErrLeaseRevoked)
	j := <-started // b/1, again: the revoked lease counts as an attempt
	require.Equal(t, "b/1@2", name(j))
	results <- nil
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "all processed")
	// The call after the held one ends the two that waited, and perhaps
	// the next end of the worker whose call was held, if it came first.
	sizes := b.sizes("ClaimNext")
	require.GreaterOrEqual(t, len(sizes), 2)
	require.Equal(t, 1, sizes[0], "the held call")
	require.GreaterOrEqual(t, sizes[1], 2, "the two ends that waited went in one batch")
	st := p.Stats()
	require.Equal(t, uint64(3), st.Succeeded)
	require.Equal(t, uint64(1), st.LeaseLost)
	require.Zero(t, st.Errors)
	for _, d := range domains {
		info, err := m.Inspect(d)
		require.NoError(t, err)
		require.Equal(t, worklease.DomainInfo{Processed: 1}, info, d)
	}
}

// A renewal batch that finds one lease gone cancels that handler alone,
// with ErrLeaseLost, and renews the others, in one ExtendMany.
func TestRenewalBatchFindsOneLeaseGone(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	rec := newRecorder(worklease.EventLeaseLost)
	m := newManager(t, worklease.WithClock(clk), worklease.WithLeaseTTL(leaseTTL))
	b := newBatching(m.Backend())
	type running struct {
		job worker.Job
		ctx context.Context
	}
	started := make(chan running, 2)
	results := make(chan error)
	p := start(t, b, func(ctx context.Context, j worker.Job) error {
		started <- running{j, ctx}
		return <-results
	}, worker.WithWorkers(2), worker.WithClock(clk), worker.WithReapEvery(0), worker.WithObserver(rec),
		worker.WithPoll(time.Millisecond))
	for _, d := range []string{"a", "b"} {
		_, err := p.Submit(context.Background(), d, 1, nil)
		require.NoError(t, err)
	}
	jobs := map[string]running{}
	for range 2 {
		r := <-started
		jobs[r.job.Domain] = r
	}
	_, err := m.ForceRelease("b")
	require.NoError(t, err)
	waitTimers(t, clk, 1) // one timer renews every lease
	clk.Advance(leaseTTL / 3 * 11 / 10)
	lost := rec.next(t, worklease.EventLeaseLost)
	require.Equal(t, "b", lost.Domain)
	<-jobs["b"].ctx.Done()
	require.ErrorIs(t, context.Cause(jobs["b"].ctx), worker.ErrLeaseLost)
	require.NoError(t, jobs["a"].ctx.Err())
	require.Equal(t, []int{2}, b.sizes("ExtendMany"))
	info, err := m.Inspect("a")
	require.NoError(t, err)
	require.Equal(t, clk.Now().Add(leaseTTL), info.Lease.ExpiresAt, "a's lease after the renewal")
	results <- nil // b's outcome is dropped
	results <- nil
	again := <-started // b/1, under a new lease
	require.Equal(t, "b/1@2", name(again.job))
	results <- nil
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "all processed")
	st := p.Stats()
	require.Equal(t, uint64(1), st.LeaseLost)
	require.Equal(t, uint64(2), st.Succeeded)
}
