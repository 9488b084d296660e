package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// TestStopLetsHandlersFinish checks that Stop claims no more work and
// waits for the handlers that run, which end their attempts as usual;
// the offsets not run stay queued.
func TestStopLetsHandlersFinish(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	started := make(chan worker.Job, 10)
	gate := make(chan struct{})
	p := start(t, m.Backend(), func(_ context.Context, j worker.Job) error {
		started <- j
		<-gate
		if j.Domain == "b" {
			return errors.New("failed")
		}
		return nil
	}, worker.WithWorkers(2), worker.WithBackoff(fastBackoff))
	ctx := context.Background()
	for _, d := range []string{"a", "b"} {
		for off := range int64(3) {
			_, err := p.Submit(ctx, d, off, nil)
			require.NoError(t, err)
		}
	}
	<-started
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop(ctx) }()
	eventually(t, func() bool {
		_, err := p.Submit(ctx, "a", 2, nil) // queued already: no more room
		return errors.Is(err, worker.ErrStopped)
	}, "Submit refused once Stop began")
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v while handlers ran", err)
	default:
	}
	close(gate)
	require.NoError(t, <-stopped)
	require.NoError(t, <-p.ran)
	p.ran <- nil
	require.Empty(t, started, "an attempt started after Stop began")

	// a/0 succeeded, b/0 failed and waits to be retried, the others wait.
	for d, want := range map[string]worklease.DomainInfo{
		"a": {Backlog: []int64{1, 2}, Processed: 1},
		"b": {Backlog: []int64{0, 1, 2}},
	} {
		info, err := m.Inspect(d)
		require.NoError(t, err)
		require.Equal(t, want, info, "%s", d)
	}
	leases, err := m.Leases()
	require.NoError(t, err)
	require.Empty(t, leases)
	st := p.Stats()
	require.Equal(t, worker.Stats{Workers: 2, Queued: 5, Started: 2, Succeeded: 1, Retried: 1}, st)
}

// TestStopCancelsHandlers checks that a Stop whose context ends cancels
// the handlers, with ErrStopped as the cause, and that their attempts are
// retried without a delay, first in their domains.
func TestStopCancelsHandlers(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	started := make(chan context.Context, 10)
	p := start(t, m.Backend(), func(ctx context.Context, j worker.Job) error {
		started <- ctx
		<-ctx.Done()
		return context.Cause(ctx)
	}, worker.WithWorkers(2), worker.WithBackoff(worklease.Backoff{Base: time.Hour}))
	ctx := context.Background()
	for _, d := range []string{"a", "b"} {
		for off := range int64(2) {
			_, err := p.Submit(ctx, d, off, nil)
			require.NoError(t, err)
		}
	}
	ctxs := []context.Context{<-started, <-started}
	stopCtx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, p.Stop(stopCtx), context.Canceled)
	for _, c := range ctxs {
		require.ErrorIs(t, context.Cause(c), worker.ErrStopped)
	}
	require.NoError(t, p.stop(t))
	for _, d := range []string{"a", "b"} {
		info, err := m.Inspect(d)
		require.NoError(t, err)
		require.Equal(t, worklease.DomainInfo{Backlog: []int64{0, 1}}, info, "%s", d)
	}

	// The next Pool finds them ready at once, on their second attempt.
	got := make(chan worker.Job, 10)
	next := start(t, m.Backend(), func(_ context.Context, j worker.Job) error {
		got <- j
		return nil
	}, worker.WithWorkers(1))
	var jobs []string
	for range 4 {
		j := <-got
		jobs = append(jobs, fmt.Sprintf("%s/%d@%d", j.Domain, j.Offset, j.Attempt))
	}
	slices.Sort(jobs)
	require.Equal(t, []string{"a/0@2", "a/1@1", "b/0@2", "b/1@1"}, jobs)
	require.NoError(t, next.stop(t))
}

// TestRunContext checks that Run's context ending stops the Pool as a
// Stop that gives up at once, and that Run returns its error.
func TestRunContext(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	started := make(chan context.Context, 1)
	p, err := worker.New(m.Backend(), func(ctx context.Context, j worker.Job) error {
		started <- ctx
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	_, err = p.Submit(ctx, "a", 1, nil)
	require.NoError(t, err)
	hctx := <-started
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)
	require.ErrorIs(t, context.Cause(hctx), worker.ErrStopped)
	require.NoError(t, p.Stop(context.Background()))
	info, err := m.Inspect("a")
	require.NoError(t, err)
	require.Equal(t, worklease.DomainInfo{Backlog: []int64{1}}, info)
}

// TestStopUnderLoad stops a Pool while producers submit and handlers fail
// at random, then lets a second Pool finish: every offset submitted is
// applied once, in order, and none is lost in between.
func TestStopUnderLoad(t *testing.T) {
	t.Parallel()
	const domains, offsets = 16, 60
	m := newManager(t, worklease.WithMaxRetries(100))
	s := newStore()
	var handled atomic.Int64
	h := func(ctx context.Context, j worker.Job) error {
		s.begin(j)
		handled.Add(1)
		if rand.IntN(5) == 0 {
			s.end(j, false)
			return errors.New("flaky")
		}
		select {
		case <-time.After(time.Duration(rand.IntN(500)) * time.Microsecond):
		case <-ctx.Done(): // Stop gave up
			s.end(j, false)
			return context.Cause(ctx)
		}
		s.end(j, true)
		return nil
	}
	first := start(t, m.Backend(), h, worker.WithWorkers(6), worker.WithBackoff(fastBackoff), worker.WithQueueLimit(200))
	ctx := context.Background()
	var mu sync.Mutex
	submitted := map[string][]int64{} // each domain's offsets that Submit accepted
	var producers sync.WaitGroup
	for g := range 4 {
		producers.Go(func() {
			for off := range int64(offsets) {
				for d := g; d < domains; d += 4 {
					dom := fmt.Sprintf("d%d", d)
					_, err := first.Submit(ctx, dom, off, nil)
					if errors.Is(err, worker.ErrStopped) {
						return
					}
					if err != nil {
						t.Errorf("Submit(%s, %d): %v", dom, off, err)
						return
					}
					mu.Lock()
					submitted[dom] = append(submitted[dom], off)
					mu.Unlock()
				}
			}
		})
	}
	eventually(t, func() bool { return handled.Load() > domains*offsets/4 }, "a quarter handled")
	stopCtx, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	_ = first.Stop(stopCtx) // nil, or DeadlineExceeded if it had to cancel handlers
	require.NoError(t, <-first.ran)
	first.ran <- nil
	producers.Wait()

	// Nothing is in flight, and each domain's offsets are the ones applied,
	// then the ones queued, in order.
	leases, err := m.Leases()
	require.NoError(t, err)
	require.Empty(t, leases)
	for dom, subs := range submitted {
		info, err := m.Inspect(dom)
		require.NoError(t, err)
		applied := s.appliedOf(dom)
		require.Equal(t, int64(len(applied)), info.Processed, "%s", dom)
		require.Equal(t, subs, slices.Concat(applied, info.Backlog), "%s: offsets applied, then queued", dom)
	}
	require.Equal(t, int(first.Stats().Queued), countQueued(t, m, submitted), "the Pool's count")

	second := start(t, m.Backend(), h, worker.WithWorkers(6), worker.WithBackoff(fastBackoff))
	eventually(t, func() bool { return countQueued(t, m, submitted) == 0 }, "the second Pool finished")
	require.NoError(t, second.stop(t))
	s.check(t)
	for dom, subs := range submitted {
		require.Equal(t, subs, s.appliedOf(dom), "%s", dom)
	}
	dead, err := m.DeadLetters("")
	require.NoError(t, err)
	require.Empty(t, dead)
}

// countQueued returns how many offsets of the domains are queued or in
// flight.
func countQueued(t *testing.T, m *worklease.Manager, domains map[string][]int64) int {
	n := 0
	for dom := range domains {
		info, err := m.Inspect(dom)
		require.NoError(t, err)
		n += len(info.Backlog)
		if info.Leased {
			n++
		}
	}
	return n
}

// TestRunEndedContext: Run with a context that ended before it stops the
// Pool before any claim: no handler starts, nothing is dead-lettered, and
// Run returns the context's error.
func TestRunEndedContext(t *testing.T) {
	m := newManager(t, worklease.WithMaxRetries(0))
	ctx := context.Background()
	var started atomic.Int32
	for i := range 50 {
		p, err := worker.New(m.Backend(), func(ctx context.Context, j worker.Job) error {
			started.Add(1)
			return context.Cause(ctx)
		}, worker.WithWorkers(16))
		require.NoError(t, err)
		for d := range 16 {
			_, err := p.Submit(ctx, fmt.Sprintf("r%d-%d", i, d), 1, nil)
			require.NoError(t, err)
		}
		ended, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, p.Run(ended), context.Canceled)
	}
	dl, err := m.DeadLetters("")
	require.NoError(t, err)
	require.Zero(t, started.Load(), "handlers started under a Run whose context had ended")
	require.Empty(t, dl)
}
