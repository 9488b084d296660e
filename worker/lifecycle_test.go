package worker_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// Lifecycle misuse: Submit before Run / after Stop, Run twice, Stop twice,
// Stop before Run, Stop with a cancelled ctx.
func TestEdgeLifecycleMisuse(t *testing.T) {
	m := newManager(t)
	var ran atomic.Int32
	p, err := worker.New(m.Backend(), func(context.Context, worker.Job) error { ran.Add(1); return nil }, worker.WithWorkers(2))
	require.NoError(t, err)
	ctx := context.Background()
	st, err := p.Submit(ctx, "a", 1, []byte("x")) // before Run
	require.NoError(t, err)
	require.Equal(t, worklease.Enqueued, st)
	require.Equal(t, 1, p.Stats().Queued)

	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	eventually(t, func() bool { return ran.Load() == 1 && p.Stats().Queued == 0 }, "ran")
	// Run twice.
	require.Error(t, p.Run(ctx))
	// Stop with cancelled ctx, nothing running.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_ = p.Stop(cctx)
	require.NoError(t, <-done)
	require.NoError(t, p.Stop(ctx)) // again
	_, err = p.Submit(ctx, "a", 2, nil)
	require.ErrorIs(t, err, worker.ErrStopped)
	require.Error(t, p.Run(ctx))
}

// TestEdgeStopBeforeRun: a Pool stopped before Run makes Run return
// ErrStopped at once.
func TestEdgeStopBeforeRun(t *testing.T) {
	m := newManager(t)
	p, err := worker.New(m.Backend(), func(context.Context, worker.Job) error { return nil })
	require.NoError(t, err)
	require.NoError(t, p.Stop(context.Background()))
	require.ErrorIs(t, p.Run(context.Background()), worker.ErrStopped)
	_, err = p.Submit(context.Background(), "a", 1, nil)
	require.ErrorIs(t, err, worker.ErrStopped)
}

// Submit concurrently with Stop, with a queue limit: no race, no hang, and
// what Submit reports Enqueued is in the backend.
func TestEdgeSubmitConcurrentStop(t *testing.T) {
	for i := range 20 {
		m := newManager(t)
		p, err := worker.New(m.Backend(), func(ctx context.Context, j worker.Job) error { return nil },
			worker.WithWorkers(4), worker.WithQueueLimit(3))
		require.NoError(t, err)
		ran := make(chan error, 1)
		go func() { ran <- p.Run(context.Background()) }()
		var wg sync.WaitGroup
		var enq atomic.Int64
		for g := range 8 {
			wg.Go(func() {
				for off := range int64(50) {
					st, err := p.Submit(context.Background(), fmt.Sprint("d", g), off, nil)
					if err != nil {
						require.ErrorIs(t, err, worker.ErrStopped)
						return
					}
					if st == worklease.Enqueued {
						enq.Add(1)
					}
				}
			})
		}
		time.Sleep(time.Duration(i) * 100 * time.Microsecond)
		require.NoError(t, p.Stop(context.Background()))
		wg.Wait()
		if err := <-ran; err != nil {
			require.ErrorIs(t, err, worker.ErrStopped) // Stop came before Run
		}
		var total int64
		ds, _ := m.Domains()
		for _, d := range ds {
			info, _ := m.Inspect(d)
			total += int64(len(info.Backlog)) + int64(info.Processed)
		}
		require.Equal(t, enq.Load(), total, "every offset Submit reported Enqueued is queued or processed")
	}
}

// panic(nil), panic(error), panic(string): each is a failed attempt, the
// worker goes on.
func TestEdgePanics(t *testing.T) {
	m := newManager(t, worklease.WithMaxRetries(0))
	var n atomic.Int32
	p := start(t, m.Backend(), func(ctx context.Context, j worker.Job) error {
		n.Add(1)
		switch j.Offset {
		case 0:
			panic(nil)
		case 1:
			panic(fmt.Errorf("wrapped: %w", context.Canceled))
		case 2:
			panic("str")
		}
		return nil
	}, worker.WithWorkers(1), worker.WithBackoff(fastBackoff))
	for off := range int64(4) {
		_, err := p.Submit(context.Background(), "a", off, nil)
		require.NoError(t, err)
	}
	eventually(t, func() bool { info, _ := m.Inspect("a"); return info.Processed == 1 }, "done")
	dl, err := m.DeadLetters("a")
	require.NoError(t, err)
	require.Len(t, dl, 3)
	var pe *worker.PanicError
	require.ErrorAs(t, dl[1].Cause, &pe)
	require.ErrorIs(t, dl[1].Cause, context.Canceled)
	// The worker counts an attempt's end after the backend's answer, which
	// Inspect may see first.
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "the queue emptied")
	s := p.Stats()
	require.Equal(t, uint64(3), s.Panicked)
	require.Equal(t, uint64(3), s.DeadLettered)
}

// A handler that calls runtime.Goexit (t.FailNow, say) ends its worker's
// goroutine: the attempt fails with a PanicError, and another goroutine
// takes the worker's place, so that the only worker goes on, its lease
// renewed, and Stop waits for it.
func TestEdgeHandlerGoexit(t *testing.T) {
	m := newManager(t, worklease.WithMaxRetries(0), worklease.WithLeaseTTL(time.Minute))
	var n atomic.Int32
	p := start(t, m.Backend(), func(ctx context.Context, j worker.Job) error {
		n.Add(1)
		if j.Offset%2 == 0 {
			runtime.Goexit()
		}
		return nil
	}, worker.WithWorkers(1), worker.WithBackoff(fastBackoff))
	for off := range int64(5) {
		_, err := p.Submit(context.Background(), "a", off, nil)
		require.NoError(t, err)
	}
	eventually(t, func() bool { info, _ := m.Inspect("a"); return info.Processed+info.Failed == 5 }, "done")
	info, err := m.Inspect("a")
	require.NoError(t, err)
	require.Equal(t, worklease.DomainInfo{Processed: 2, Failed: 3}, info)
	dl, err := m.DeadLetters("a")
	require.NoError(t, err)
	require.Len(t, dl, 3)
	var pe *worker.PanicError
	require.ErrorAs(t, dl[0].Cause, &pe)
	require.ErrorContains(t, dl[0].Cause, "runtime.Goexit")
	require.Equal(t, int32(5), n.Load())
	// The worker counts an attempt's end after the backend's answer, which
	// Inspect may see first.
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "the queue emptied")
	s := p.Stats()
	require.Equal(t, uint64(3), s.Panicked)
	require.Equal(t, uint64(2), s.Succeeded)
	require.Equal(t, uint64(3), s.DeadLettered)
	require.Equal(t, 0, s.InFlight)
}

// A handler returning a wrapped context error without being cancelled is an
// ordinary failure: retried with the backoff's delay, not at once.
func TestEdgeWrappedCtxErrNotStop(t *testing.T) {
	m := newManager(t)
	var calls atomic.Int32
	p := start(t, m.Backend(), func(ctx context.Context, j worker.Job) error {
		calls.Add(1)
		return fmt.Errorf("db: %w", context.DeadlineExceeded)
	}, worker.WithWorkers(1), worker.WithBackoff(worklease.Backoff{Base: time.Hour, Jitter: -1}))
	_, err := p.Submit(context.Background(), "a", 1, nil)
	require.NoError(t, err)
	eventually(t, func() bool { return p.Stats().Retried == 1 }, "retried")
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, int32(1), calls.Load())
}

// Same (domain, offset) twice, and out of order offsets: runs once each,
// in first-submitted order; Queued back to 0.
func TestEdgeDuplicateAndOrder(t *testing.T) {
	m := newManager(t)
	var mu sync.Mutex
	var got []int64
	gate := make(chan struct{})
	p := start(t, m.Backend(), func(ctx context.Context, j worker.Job) error {
		<-gate
		mu.Lock()
		got = append(got, j.Offset)
		mu.Unlock()
		return nil
	}, worker.WithWorkers(4))
	ctx := context.Background()
	for _, off := range []int64{5, 3, 5, 9, 3, 1} {
		_, err := p.Submit(ctx, "a", off, nil)
		require.NoError(t, err)
	}
	require.Equal(t, 4, p.Stats().Queued)
	close(gate)
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "drained")
	mu.Lock()
	require.Equal(t, []int64{5, 3, 9, 1}, got)
	mu.Unlock()
	st, err := p.Submit(ctx, "a", 5, nil)
	require.NoError(t, err)
	require.Equal(t, worklease.AlreadyProcessed, st)
	require.Equal(t, 0, p.Stats().Queued)
}

// Bad input to Submit: errors, and no slot kept.
func TestEdgeSubmitBadInput(t *testing.T) {
	m := newManager(t)
	p := start(t, m.Backend(), func(ctx context.Context, j worker.Job) error { return nil }, worker.WithQueueLimit(1), worker.WithSubmitNoWait())
	ctx := context.Background()
	_, err := p.Submit(ctx, "", 1, nil)
	require.ErrorIs(t, err, worklease.ErrInvalidDomain)
	_, err = p.Submit(ctx, "a", -1, nil)
	require.ErrorIs(t, err, worklease.ErrInvalidOffset)
	_, err = p.Submit(ctx, string(make([]byte, worklease.MaxDomainLen+1)), 1, nil)
	require.ErrorIs(t, err, worklease.ErrInvalidDomain)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = p.Submit(cctx, "a", 1, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 0, p.Stats().Queued)
	_, err = p.Submit(ctx, "a", 1, nil)
	require.NoError(t, err)
}

// Queue limit 1 with many domains and many producers: everything runs, no
// deadlock, Queued never exceeds 1.
func TestEdgeQueueLimitOne(t *testing.T) {
	m := newManager(t)
	var maxQ atomic.Int64
	var p *running
	var total atomic.Int64
	p = start(t, m.Backend(), func(ctx context.Context, j worker.Job) error {
		total.Add(1)
		if q := int64(p.Stats().Queued); q > maxQ.Load() {
			maxQ.Store(q)
		}
		return nil
	}, worker.WithWorkers(8), worker.WithQueueLimit(1))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for off := range int64(20) {
				_, err := p.Submit(context.Background(), fmt.Sprint("d", g), off, nil)
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	eventually(t, func() bool { return total.Load() == 16*20 }, "all ran")
	require.LessOrEqual(t, maxQ.Load(), int64(1))
	// The last handler returned; its end may still be on its way.
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "the queue emptied")
}
