package worker_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// lossy is a backend whose calls can fail, as over a network: before
// reaching the backend (nothing changed), or after it answered (the answer
// is lost, as with pg.ErrOutcomeUnknown).
type lossy struct {
	worklease.Backend
	mu     sync.Mutex     // guards the maps
	before map[string]int // call name: failures left, before the backend
	after  map[string]int // call name: answers left to lose
}

var errLossy = errors.New("lossy: connection reset")

// fault says whether call name fails before the backend, or loses its
// answer after it.
func (l *lossy) fault(name string) (before, after bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.before[name] > 0:
		l.before[name]--
		return true, false
	case l.after[name] > 0:
		l.after[name]--
		return false, true
	}
	return false, false
}

func (l *lossy) WaitClaim(ctx context.Context, n int, poll time.Duration) ([]worklease.Claim, error) {
	if before, _ := l.fault("WaitClaim"); before {
		return nil, errLossy
	}
	return l.Backend.WaitClaim(ctx, n, poll)
}

func (l *lossy) ClaimNext(ctx context.Context, cs []worklease.Claim) ([]worklease.Claim, []error, error) {
	before, after := l.fault("ClaimNext")
	if before {
		return nil, nil, errLossy
	}
	next, errs, err := l.Backend.ClaimNext(ctx, cs)
	if after {
		return nil, nil, errLossy
	}
	return next, errs, err
}

func (l *lossy) RetryMany(ctx context.Context, fs []worklease.Failure) ([]worklease.RetryResult, []error, error) {
	before, after := l.fault("RetryMany")
	if before {
		return nil, nil, errLossy
	}
	res, errs, err := l.Backend.RetryMany(ctx, fs)
	if after {
		return nil, nil, errLossy
	}
	return res, errs, err
}

// Calls that fail before they reach the backend are made again, each
// failure counted as an error, and nothing is lost or run twice.
func TestCallsFailingBeforeTheBackend(t *testing.T) {
	m := newManager(t)
	b := &lossy{Backend: m.Backend(), before: map[string]int{"WaitClaim": 2, "ClaimNext": 2, "RetryMany": 2}}
	var mu sync.Mutex
	ran := map[int64]int{} // successful runs by offset
	var errs atomic.Int32
	p := start(t, b, func(ctx context.Context, j worker.Job) error {
		if j.Offset == 2 && j.Attempt == 1 {
			return errIgnored
		}
		mu.Lock()
		ran[j.Offset]++
		mu.Unlock()
		return nil
	}, worker.WithWorkers(1), worker.WithBackoff(fastBackoff), worker.WithErrorFunc(func(error) { errs.Add(1) }))
	submitAll(t, m, p, 4)
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "queue drained")
	s := p.Stats()
	require.Equal(t, uint64(6), s.Errors)
	require.Equal(t, int32(6), errs.Load())
	require.Zero(t, s.LeaseLost)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[int64]int{0: 1, 1: 1, 2: 1, 3: 1}, ran)
}

// A ClaimNext that went through but whose answer was lost is made again,
// and answers with the next lease it granted: the success is counted as
// one, and the next offset runs at once, under that lease, rather than
// waiting under a lease nobody holds.
func TestClaimNextAnswerLost(t *testing.T) {
	m := newManager(t)
	b := &lossy{Backend: m.Backend(), after: map[string]int{"ClaimNext": 1}}
	rec := newRecorder(worklease.EventLeaseLost)
	p := start(t, b, func(ctx context.Context, j worker.Job) error { return nil },
		worker.WithWorkers(2), worker.WithBackoff(fastBackoff), worker.WithObserver(rec))
	submitAll(t, m, p, 3)
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "queue drained")
	s := p.Stats()
	require.Zero(t, s.LeaseLost, "a success reported as a lost lease")
	require.Equal(t, uint64(3), s.Succeeded)
	require.Equal(t, uint64(1), s.Errors)
}

// A ClaimNext whose answer was lost, and that granted no next lease, as
// the domain had none queued: made again, it is refused, as the lease is
// gone; the Pool counts the success, not a lost lease.
func TestClaimNextAnswerLostLast(t *testing.T) {
	m := newManager(t)
	b := &lossy{Backend: m.Backend(), after: map[string]int{"ClaimNext": 1}}
	rec := newRecorder(worklease.EventLeaseLost)
	p := start(t, b, func(ctx context.Context, j worker.Job) error { return nil },
		worker.WithWorkers(1), worker.WithBackoff(fastBackoff), worker.WithObserver(rec))
	_, err := p.Submit(context.Background(), "a", 0, nil)
	require.NoError(t, err)
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "queue drained")
	s := p.Stats()
	require.Zero(t, s.LeaseLost)
	require.Zero(t, rec.count(worklease.EventLeaseLost))
	require.Equal(t, uint64(1), s.Succeeded)
	info, err := m.Inspect("a")
	require.NoError(t, err)
	require.Equal(t, worklease.DomainInfo{Processed: 1}, info)
}

// As above with expiring leases and no retries: the next offset is run,
// not left to expire unheld, which would make it a dead letter without an
// attempt.
func TestClaimNextAnswerLostNoDeadLetter(t *testing.T) {
	m := newManager(t, worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(0))
	b := &lossy{Backend: m.Backend(), after: map[string]int{"ClaimNext": 1}}
	var mu sync.Mutex
	ran := map[int64]int{}
	p := start(t, b, func(ctx context.Context, j worker.Job) error {
		mu.Lock()
		ran[j.Offset]++
		mu.Unlock()
		return nil
	}, worker.WithWorkers(2), worker.WithBackoff(fastBackoff))
	submitAll(t, m, p, 3)
	dl, err := m.DeadLetters("a")
	require.NoError(t, err)
	require.Empty(t, dl)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[int64]int{0: 1, 1: 1, 2: 1}, ran)
}

// A Retry that went through but whose answer was lost is made again, and
// refused, as the lease is gone: the Pool counts the attempt it ended as
// retried (or dead-lettered), not as a lost lease.
func TestRetryAnswerLost(t *testing.T) {
	for _, maxRetries := range []int{1, 0} {
		m := newManager(t, worklease.WithMaxRetries(maxRetries))
		b := &lossy{Backend: m.Backend(), after: map[string]int{"RetryMany": 1}}
		rec := newRecorder(worklease.EventLeaseLost)
		var calls atomic.Int32
		p := start(t, b, func(ctx context.Context, j worker.Job) error {
			if calls.Add(1) == 1 {
				return errIgnored
			}
			return nil
		}, worker.WithWorkers(1), worker.WithBackoff(fastBackoff), worker.WithObserver(rec))
		_, err := p.Submit(context.Background(), "a", 0, nil)
		require.NoError(t, err)
		eventually(t, func() bool { info, _ := m.Inspect("a"); return info.Processed+info.Failed == 1 }, "ended")
		eventually(t, func() bool { return p.Stats().Queued == 0 }, "drained")
		s := p.Stats()
		require.Zero(t, s.LeaseLost, "an attempt the Pool ended itself reported as a lost lease")
		require.Zero(t, rec.count(worklease.EventLeaseLost))
		require.Equal(t, uint64(1), s.Errors)
		if maxRetries == 0 {
			require.Equal(t, uint64(1), s.DeadLettered)
		} else {
			require.Equal(t, uint64(1), s.Retried)
			require.Equal(t, uint64(1), s.Succeeded)
		}
	}
}

// A Retry whose answer was lost, that dead-lettered an offset the Pool
// did not Submit (stored with the backend's Enqueue, which the Pool runs
// too), counts as dead-lettered.
func TestRetryAnswerLostDeadLetter(t *testing.T) {
	m := newManager(t, worklease.WithMaxRetries(0))
	b := &lossy{Backend: m.Backend(), after: map[string]int{"RetryMany": 1}}
	p := start(t, b, func(ctx context.Context, j worker.Job) error { return errIgnored },
		worker.WithWorkers(1), worker.WithBackoff(fastBackoff))
	_, err := m.Enqueue("a", 0, nil)
	require.NoError(t, err)
	eventually(t, func() bool { s := p.Stats(); return s.Retried+s.DeadLettered == 1 }, "attempt ended")
	info, err := m.Inspect("a")
	require.NoError(t, err)
	require.EqualValues(t, 1, info.Failed, "the offset is a dead letter")
	s := p.Stats()
	require.Equal(t, uint64(1), s.DeadLettered, "stats %+v: the dead letter counted as a retry", s)
	require.Zero(t, s.Retried)
}

// slowRetry loses the answer of the first Retry, and makes the second
// wait until the domain's offset was processed (by another Pool).
type slowRetry struct {
	worklease.Backend
	m     *worklease.Manager
	calls atomic.Int32
}

func (s *slowRetry) RetryMany(ctx context.Context, fs []worklease.Failure) ([]worklease.RetryResult, []error, error) {
	if s.calls.Add(1) == 1 {
		_, _, _ = s.Backend.RetryMany(ctx, fs)
		return nil, nil, errLossy
	}
	for _, f := range fs {
		for {
			info, _ := s.m.Inspect(f.Domain)
			if info.Processed == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return s.Backend.RetryMany(ctx, fs)
}

// A Retry whose answer was lost, made again after another Pool (or
// process) ran the retried offset to success, counts as retried: it was.
func TestRetryAnswerLostThenFinishedElsewhere(t *testing.T) {
	m := newManager(t, worklease.WithMaxRetries(3))
	b := &slowRetry{Backend: m.Backend(), m: m}
	entered := make(chan struct{})
	var once sync.Once
	p1 := start(t, b, func(ctx context.Context, j worker.Job) error {
		once.Do(func() { close(entered) })
		return errIgnored
	}, worker.WithWorkers(1), worker.WithBackoff(fastBackoff))
	_, err := p1.Submit(context.Background(), "a", 0, nil)
	require.NoError(t, err)
	<-entered
	start(t, m.Backend(), func(ctx context.Context, j worker.Job) error { return nil },
		worker.WithWorkers(1), worker.WithBackoff(fastBackoff))
	eventually(t, func() bool { s := p1.Stats(); return s.Retried+s.DeadLettered == 1 }, "attempt ended")
	info, err := m.Inspect("a")
	require.NoError(t, err)
	require.Equal(t, worklease.DomainInfo{Processed: 1}, info)
	s := p1.Stats()
	require.Zero(t, s.DeadLettered, "stats %+v: nothing was dead-lettered", s)
	require.Equal(t, uint64(1), s.Retried)
}

// Handlers calling runtime.Goexit under load, with panics, renewals and a
// Stop whose ctx ends while handlers run: no goroutine is left behind
// (goleak in TestMain), and every count adds up.
func TestGoexitUnderLoad(t *testing.T) {
	for round := 0; round < 20; round++ {
		m := newManager(t, worklease.WithMaxRetries(2), worklease.WithLeaseTTL(30*time.Millisecond))
		var n atomic.Int64
		p, err := worker.New(m.Backend(), func(ctx context.Context, j worker.Job) error {
			switch n.Add(1) % 4 {
			case 0:
				runtime.Goexit()
			case 1:
				panic("boom")
			case 2:
				select {
				case <-ctx.Done():
					runtime.Goexit()
				case <-time.After(time.Duration(j.Offset%7) * time.Millisecond):
				}
			}
			return nil
		}, worker.WithWorkers(4), worker.WithBackoff(fastBackoff))
		require.NoError(t, err)
		ran := make(chan error, 1)
		go func() { ran <- p.Run(context.Background()) }()
		for d := 0; d < 5; d++ {
			for off := int64(0); off < 20; off++ {
				_, err := p.Submit(context.Background(), string(rune('a'+d)), off, nil)
				require.NoError(t, err)
			}
		}
		time.Sleep(time.Duration(round%5) * 5 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_ = p.Stop(ctx)
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, worker.ErrStopped) {
			t.Fatal(err)
		}
		s := p.Stats()
		require.Zero(t, s.InFlight, "%+v", s)
		require.LessOrEqual(t, s.Succeeded+s.Retried+s.DeadLettered+s.LeaseLost, s.Started, "%+v", s)
	}
}

// submitAll submits offsets 0 to n-1 of domain "a" to p, and waits until
// m has processed them all.
func submitAll(t *testing.T, m *worklease.Manager, p *running, n int64) {
	t.Helper()
	for off := range n {
		_, err := p.Submit(context.Background(), "a", off, nil)
		require.NoError(t, err)
	}
	eventually(t, func() bool { info, _ := m.Inspect("a"); return info.Processed == n }, "all processed")
}
