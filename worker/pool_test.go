package worker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/worker"
)

func TestNewRefusesInvalidOptions(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	h := func(context.Context, worker.Job) error { return nil }
	for name, tc := range map[string]struct {
		b    worklease.Backend
		h    worker.Handler
		opts []worker.Option
	}{
		"no backend":    {nil, h, nil},
		"no handler":    {m.Backend(), nil, nil},
		"no workers":    {m.Backend(), h, []worker.Option{worker.WithWorkers(0)}},
		"queue limit":   {m.Backend(), h, []worker.Option{worker.WithQueueLimit(-1)}},
		"reap every":    {m.Backend(), h, []worker.Option{worker.WithReapEvery(-time.Second)}},
		"reap every -1": {m.Backend(), h, []worker.Option{worker.WithReapEvery(-1)}},
		"last applies":  {m.Backend(), h, []worker.Option{worker.WithWorkers(4), worker.WithWorkers(-4)}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := worker.New(tc.b, tc.h, tc.opts...)
			require.ErrorIs(t, err, worklease.ErrInvalidConfig)
			require.Nil(t, p)
		})
	}
	p, err := worker.New(m.Backend(), h, nil, worker.WithQueueLimit(0), worker.WithReapEvery(0))
	require.NoError(t, err)
	require.Equal(t, worker.DefaultWorkers, p.Stats().Workers)
}

// TestLifecycle checks the calls around Run: Run once, Stop before Run,
// Submit after Stop.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	h := func(context.Context, worker.Job) error { return nil }
	ctx := context.Background()

	p, err := worker.New(m.Backend(), h)
	require.NoError(t, err)
	st, err := p.Submit(ctx, "a", 1, nil) // before Run: stored for later
	require.NoError(t, err)
	require.Equal(t, worklease.Enqueued, st)
	require.NoError(t, p.Stop(ctx))
	require.NoError(t, p.Stop(ctx))
	require.ErrorIs(t, p.Run(ctx), worker.ErrStopped)
	_, err = p.Submit(ctx, "a", 2, nil)
	require.ErrorIs(t, err, worker.ErrStopped)
	_, err = p.Submit(ctx, "", 2, nil)
	require.ErrorIs(t, err, worker.ErrStopped)

	r := start(t, m.Backend(), h)
	eventually(t, func() bool { // the offset submitted before Run
		info, err := m.Inspect("a")
		return err == nil && info.Processed == 1
	}, "a/1 processed")
	require.Error(t, r.Run(ctx), "Run called twice")
	_, err = r.Submit(ctx, "", 1, nil)
	require.ErrorIs(t, err, worklease.ErrInvalidDomain, "the backend's error")
	require.Zero(t, r.Stats().Queued)
	require.NoError(t, r.stop(t))
	require.NoError(t, r.stop(t))
}

// TestPanic checks that a handler's panic is a failed attempt, whose cause
// is a *PanicError, and that the worker goes on.
func TestPanic(t *testing.T) {
	t.Parallel()
	rec := newRecorder(worklease.EventRetrying, worklease.EventDeadLettered, worklease.EventProcessed)
	m := newManager(t, worklease.WithMaxRetries(1), worklease.WithObserver(rec))
	boom := errors.New("boom")
	p := start(t, m.Backend(), func(_ context.Context, j worker.Job) error {
		switch {
		case j.Domain == "a" && j.Attempt == 1:
			panic(boom)
		case j.Domain == "b":
			panic(fmt.Sprintf("never works: %d", j.Offset))
		}
		return nil
	}, worker.WithWorkers(1), worker.WithBackoff(fastBackoff))
	ctx := context.Background()
	_, err := p.Submit(ctx, "a", 1, nil)
	require.NoError(t, err)
	retrying := rec.next(t, worklease.EventRetrying)
	var pe *worker.PanicError
	require.ErrorAs(t, retrying.Cause, &pe)
	require.Equal(t, boom, pe.Value)
	require.ErrorIs(t, retrying.Cause, boom)
	require.Contains(t, string(pe.Stack), "TestPanic")
	require.Contains(t, pe.Error(), "worker: handler panicked: boom")
	rec.next(t, worklease.EventProcessed)

	_, err = p.Submit(ctx, "b", 7, nil)
	require.NoError(t, err)
	dead := rec.next(t, worklease.EventDeadLettered)
	require.ErrorAs(t, dead.Cause, &pe)
	require.Equal(t, "never works: 7", pe.Value)
	require.NotErrorIs(t, dead.Cause, boom)
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "both offsets finished")
	st := p.Stats()
	require.Equal(t, uint64(3), st.Panicked)
	require.Equal(t, uint64(1), st.Succeeded)
	require.Equal(t, uint64(1), st.DeadLettered)
	require.Equal(t, uint64(2), st.Retried)
}

// TestRetryHoldsNoWorker checks that an offset waiting out its retry's
// delay holds no worker, and that nothing of its domain overtakes it.
func TestRetryHoldsNoWorker(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	m := newManager(t, worklease.WithClock(clk))
	h, started, results := gated()
	const delay = time.Hour
	p := start(t, m.Backend(), h, worker.WithWorkers(1), worker.WithClock(clk), worker.WithPoll(time.Millisecond),
		worker.WithBackoff(worklease.Backoff{Base: delay / 2, Max: delay, Jitter: -1})) // the first retry waits 2*Base
	ctx := context.Background()
	for _, job := range []struct {
		d   string
		off int64
	}{{"a", 1}, {"a", 2}, {"b", 1}} {
		_, err := p.Submit(ctx, job.d, job.off, nil)
		require.NoError(t, err)
	}
	j := <-started
	require.Equal(t, "a/1@1", name(j))
	results <- errIgnored
	j = <-started // the one worker goes on with b
	require.Equal(t, "b/1@1", name(j))
	results <- nil
	info, err := m.Inspect("a")
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, info.Backlog)
	clk.Advance(delay - time.Second)
	select {
	case j := <-started:
		t.Fatalf("%s started before a/1's delay ended", name(j))
	case <-time.After(20 * time.Millisecond): // many of the worker's polls
	}
	clk.Advance(time.Second)
	j = <-started
	require.Equal(t, "a/1@2", name(j))
	results <- nil
	j = <-started
	require.Equal(t, "a/2@1", name(j))
	results <- nil
}

func name(j worker.Job) string { return fmt.Sprintf("%s/%d@%d", j.Domain, j.Offset, j.Attempt) }

// TestEvents checks that the Pool tells EventStarted to its observer, in
// order with the backend's transitions when both have the same observer
// and the Pool's calls are the only ones on the domain, and that Stats
// does not count it. (The offset is submitted before Run: the backend
// leaves a call's events to a goroutine still telling the domain's earlier
// ones, and Submit's, telling EventEnqueued, could tell the Pool's
// EventAcquired after the Pool's EventStarted.)
func TestEvents(t *testing.T) {
	t.Parallel()
	rec := newRecorder(worklease.EventProcessed)
	m := newManager(t, worklease.WithObserver(rec), worklease.WithLeaseTTL(time.Hour))
	p, err := worker.New(m.Backend(), func(_ context.Context, j worker.Job) error {
		require.Equal(t, []byte("payload"), j.Payload)
		if j.Attempt == 1 {
			return errIgnored
		}
		return nil
	}, worker.WithWorkers(1), worker.WithObserver(rec), worker.WithBackoff(fastBackoff))
	require.NoError(t, err)
	_, err = p.Submit(context.Background(), "a", 1, []byte("payload"))
	require.NoError(t, err)
	run(t, p)
	rec.next(t, worklease.EventProcessed)
	require.Equal(t, []worklease.EventKind{
		worklease.EventEnqueued,
		worklease.EventAcquired, worklease.EventStarted, worklease.EventRetrying, worklease.EventRequeued,
		worklease.EventAcquired, worklease.EventStarted, worklease.EventProcessed,
	}, rec.of("a"))
	var started []worklease.Event
	rec.mu.Lock()
	for _, e := range rec.events {
		if e.Kind == worklease.EventStarted {
			started = append(started, e)
		}
	}
	rec.mu.Unlock()
	require.Len(t, started, 2)
	require.Equal(t, 2, started[1].Attempt)
	require.Equal(t, int64(1), started[1].Offset)
	require.False(t, started[1].Token.IsZero())
	require.False(t, started[1].At.IsZero())
	require.Equal(t, worklease.Stats{Acquired: 2, Enqueued: 1, Processed: 1, Retried: 1, Requeued: 1}, m.Stats())
}

// TestBackendClosed checks that a Pool stops once its backend is closed,
// and that Run says why.
func TestBackendClosed(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	var seen []error
	p, err := worker.New(m.Backend(), func(context.Context, worker.Job) error { return nil },
		worker.WithErrorFunc(func(err error) { seen = append(seen, err) }), worker.WithWorkers(1))
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	_, err = p.Submit(context.Background(), "a", 1, nil)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	select {
	case err := <-ran:
		require.ErrorIs(t, err, worklease.ErrClosed)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after the backend closed")
	}
	require.NotEmpty(t, seen)
	require.ErrorIs(t, seen[len(seen)-1], worklease.ErrClosed)
	require.NotZero(t, p.Stats().Errors)
	_, err = p.Submit(context.Background(), "a", 2, nil)
	require.ErrorIs(t, err, worker.ErrStopped)
	require.NoError(t, p.Stop(context.Background()))
}
