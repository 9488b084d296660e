package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/worker"
)

// A leaseEnv is a Manager and a one-worker Pool on the same fake clock,
// with a handler that reports each attempt and waits to be told how to
// end it.
type leaseEnv struct {
	t       *testing.T
	clk     *clock.Fake
	m       *worklease.Manager
	rec     *recorder // the Manager's and the Pool's events
	p       *running
	started chan attempt
}

// An attempt is a running handler: its job, and how it ends.
type attempt struct {
	job    worker.Job
	ctx    context.Context
	result chan error // the handler returns what it receives
}

const leaseTTL = 30 * time.Second

func newLeaseEnv(t *testing.T, opts ...worklease.Option) *leaseEnv {
	e := &leaseEnv{
		t: t, clk: clock.NewFake(time.Unix(1_700_000_000, 0)), started: make(chan attempt),
		rec: newRecorder(worklease.EventExtended, worklease.EventLeaseLost, worklease.EventProcessed),
	}
	e.m = newManager(t, append([]worklease.Option{worklease.WithClock(e.clk), worklease.WithObserver(e.rec)}, opts...)...)
	e.p = start(t, e.m.Backend(), func(ctx context.Context, job worker.Job) error {
		a := attempt{job, ctx, make(chan error)}
		e.started <- a
		return <-a.result
	}, worker.WithWorkers(1), worker.WithClock(e.clk), worker.WithObserver(e.rec), worker.WithReapEvery(0),
		worker.WithBackoff(fastBackoff), worker.WithPoll(time.Millisecond))
	return e
}

func (e *leaseEnv) next() attempt {
	e.t.Helper()
	select {
	case a := <-e.started:
		return a
	case <-time.After(time.Minute):
		e.t.Fatal("no attempt started within a minute")
		return attempt{}
	}
}

// renewal moves the clock on by d once the Pool's renewal timer is set,
// and waits for the renewal that follows to extend the lease.
func (e *leaseEnv) renewal(d time.Duration) worklease.Event {
	e.t.Helper()
	waitTimers(e.t, e.clk, 1)
	e.clk.Advance(d)
	return e.rec.next(e.t, worklease.EventExtended)
}

// TestRenewal checks that the Pool keeps the lease of a handler that runs
// longer than the lease's TTL, renewing it at about a third of the TTL.
func TestRenewal(t *testing.T) {
	t.Parallel()
	e := newLeaseEnv(t, worklease.WithLeaseTTL(leaseTTL))
	_, err := e.p.Submit(context.Background(), "a", 1, nil)
	require.NoError(t, err)
	a := e.next()
	claimed := e.clk.Now()
	for range 4 { // two TTLs
		ext := e.renewal(leaseTTL / 3 * 11 / 10) // the jitter's most
		info, err := e.m.Inspect("a")
		require.NoError(t, err)
		require.Equal(t, a.job.Token, info.Lease.Token)
		require.Equal(t, e.clk.Now().Add(leaseTTL), info.Lease.ExpiresAt, "the lease after a renewal")
		require.Equal(t, a.job.Token, ext.Token)
	}
	require.Greater(t, e.clk.Now().Sub(claimed), leaseTTL)
	require.NoError(t, a.ctx.Err())
	a.result <- nil
	e.rec.next(t, worklease.EventProcessed)
	require.Zero(t, e.p.Stats().LeaseLost)
}

// TestLeaseLost checks that a renewal that finds the lease gone cancels
// the handler's context, with a cause that says so, tells EventLeaseLost,
// and ends nothing with the dead token: the offset runs again, under a
// new lease.
func TestLeaseLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lose func(e *leaseEnv)
		want error
	}{
		{"revoked", func(e *leaseEnv) {
			_, err := e.m.ForceRelease("a")
			require.NoError(e.t, err)
			waitTimers(e.t, e.clk, 1)
			e.clk.Advance(leaseTTL / 2)
		}, worklease.ErrLeaseRevoked},
		{"expired", func(e *leaseEnv) {
			waitTimers(e.t, e.clk, 1)
			e.clk.Advance(leaseTTL) // the renewal comes too late
		}, worklease.ErrLeaseExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newLeaseEnv(t, worklease.WithLeaseTTL(leaseTTL))
			_, err := e.p.Submit(context.Background(), "a", 1, nil)
			require.NoError(t, err)
			_, err = e.p.Submit(context.Background(), "a", 2, nil)
			require.NoError(t, err)
			a := e.next()
			tc.lose(e)
			select {
			case <-a.ctx.Done():
			case <-time.After(time.Minute):
				t.Fatal("the handler's context was not cancelled")
			}
			cause := context.Cause(a.ctx)
			require.ErrorIs(t, cause, worker.ErrLeaseLost)
			require.ErrorIs(t, cause, tc.want)
			lost := e.rec.next(t, worklease.EventLeaseLost)
			require.ErrorIs(t, lost.Cause, tc.want)
			require.Equal(t, worklease.Event{Kind: worklease.EventLeaseLost, Domain: "a", Offset: 1, Attempt: 1, Token: a.job.Token, Cause: lost.Cause, At: e.clk.Now()}, lost)
			a.result <- nil // as if the work was done: its outcome is dropped all the same

			again := e.next() // the same offset, under a new lease
			require.Equal(t, int64(1), again.job.Offset)
			require.Greater(t, again.job.Token.Fence(), a.job.Token.Fence())
			again.result <- nil
			e.next().result <- nil // offset 2
			e.rec.next(t, worklease.EventProcessed)
			e.rec.next(t, worklease.EventProcessed)
			require.Equal(t, 1, e.rec.count(worklease.EventLeaseLost))
			// The renewal's Extend was refused; nothing else was.
			require.Equal(t, 1, e.rec.count(worklease.EventRejected), "the Pool used the dead token again")
			eventually(t, func() bool { return e.p.Stats().Queued == 0 }, "the queue emptied")
			st := e.p.Stats()
			require.Equal(t, uint64(1), st.LeaseLost)
			require.Equal(t, uint64(2), st.Succeeded)
			require.Zero(t, st.Retried)
		})
	}
}

// TestLeaseLostAtEnd checks that a lease found gone when the attempt
// ends, where no renewal looked (leases that never expire), is told as
// lost, and that the offset runs again.
func TestLeaseLostAtEnd(t *testing.T) {
	t.Parallel()
	e := newLeaseEnv(t)
	_, err := e.p.Submit(context.Background(), "a", 1, nil)
	require.NoError(t, err)
	a := e.next()
	_, err = e.m.ForceRelease("a")
	require.NoError(t, err)
	a.result <- errors.New("failed, too late")
	lost := e.rec.next(t, worklease.EventLeaseLost)
	require.ErrorIs(t, lost.Cause, worklease.ErrLeaseRevoked)
	again := e.next()
	require.Equal(t, int64(1), again.job.Offset)
	again.result <- nil
	e.rec.next(t, worklease.EventProcessed)
	eventually(t, func() bool { return e.p.Stats().Queued == 0 }, "the queue emptied")
	st := e.p.Stats()
	require.Equal(t, uint64(1), st.LeaseLost)
	require.Zero(t, st.Retried)
	require.Zero(t, st.Errors)
}

// TestLeaseLostLastAttempt checks that an offset whose lease expired on
// its last attempt, which made it a dead letter, leaves the queue.
func TestLeaseLostLastAttempt(t *testing.T) {
	t.Parallel()
	e := newLeaseEnv(t, worklease.WithLeaseTTL(leaseTTL), worklease.WithMaxRetries(0))
	_, err := e.p.Submit(context.Background(), "a", 1, nil)
	require.NoError(t, err)
	a := e.next()
	waitTimers(t, e.clk, 1)
	e.clk.Advance(leaseTTL)
	e.rec.next(t, worklease.EventLeaseLost)
	a.result <- context.Cause(a.ctx)
	eventually(t, func() bool { return e.p.Stats().Queued == 0 }, "the dead letter left the queue")
	dead, err := e.m.DeadLetters("a")
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.ErrorIs(t, dead[0].Cause, worklease.ErrLeaseExpired)
}

// TestReap checks that the Pool reaps expired leases in the background,
// also while its workers are all busy: a lease that a crashed process
// held is revoked, and its offset runs.
func TestReap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []worker.Option
		// step is how far each of the clock's two moves goes: the second
		// one passes the crashed lease's expiry and the reaping's time.
		step time.Duration
	}{
		{"every", []worker.Option{worker.WithReapEvery(leaseTTL / 2)}, leaseTTL / 2},
		{"default", nil, leaseTTL / 2}, // every TTL, once the Pool claimed a lease that expires
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			rec := newRecorder(worklease.EventExtended, worklease.EventExpired, worklease.EventProcessed)
			m := newManager(t, worklease.WithClock(clk), worklease.WithObserver(rec), worklease.WithLeaseTTL(leaseTTL))
			crashed, err := m.TryAcquire("crashed", 1) // another process's, which it will never end
			require.NoError(t, err)
			require.Equal(t, worklease.Acquired, crashed.Status)
			h, started, results := gated()
			p := start(t, m.Backend(), h, append([]worker.Option{worker.WithWorkers(1), worker.WithClock(clk)}, tc.opts...)...)
			_, err = p.Submit(context.Background(), "busy", 1, nil)
			require.NoError(t, err)
			<-started
			// Two timers: the busy lease's renewal, and the reaping.
			waitTimers(t, clk, 2)
			clk.Advance(tc.step)
			rec.next(t, worklease.EventExtended)
			waitTimers(t, clk, 2)
			clk.Advance(tc.step)
			exp := rec.next(t, worklease.EventExpired)
			require.Equal(t, "crashed", exp.Domain)
			require.Equal(t, crashed.Token, exp.Token)
			results <- nil
			rec.next(t, worklease.EventProcessed)
			j := <-started // the crashed process's offset, now the Pool's
			require.Equal(t, "crashed/1@2", name(j))
			results <- nil
		})
	}
}

// waitTimers waits until clk has n timers pending, for a minute at most.
func waitTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	timeout := make(chan struct{})
	timer := time.AfterFunc(time.Minute, func() { close(timeout) })
	defer timer.Stop()
	if !clk.WaitTimers(n, timeout) {
		t.Fatalf("%d timers pending after a minute, want %d", clk.Timers(), n)
	}
}

// TestShortLeaseRenewedInTime: a lease shorter than the least a renewal
// extends one by is renewed before it runs out, at a third of the time it
// has left, so a handler that runs for three of its TTLs keeps it. The
// clock is the fake one: on the system clock, a renewal that a loaded
// machine delays by two thirds of the TTL, 13ms here, finds the lease
// expired.
func TestShortLeaseRenewedInTime(t *testing.T) {
	t.Parallel()
	const ttl = 20 * time.Millisecond
	e := newLeaseEnv(t, worklease.WithLeaseTTL(ttl))
	_, err := e.p.Submit(context.Background(), "a", 1, nil)
	require.NoError(t, err)
	a := e.next()
	claimed := e.clk.Now()
	for e.clk.Now().Sub(claimed) < 3*ttl { // runs three TTLs: the Pool must renew
		info, err := e.m.Inspect("a")
		require.NoError(t, err)
		left := info.Lease.ExpiresAt.Sub(e.clk.Now())
		ext := e.renewal(left * 2 / 5) // past a third, and the jitter's tenth of it
		require.Equal(t, a.job.Token, ext.Token)
	}
	require.NoError(t, a.ctx.Err())
	a.result <- nil
	e.rec.next(t, worklease.EventProcessed)
	require.Zero(t, e.p.Stats().LeaseLost, "lease lost although the Pool renews at a third of the time it has left")
}
