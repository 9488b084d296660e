package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// gated returns a handler that reports each job and returns once told to,
// and the channels it uses.
func gated() (worker.Handler, chan worker.Job, chan error) {
	started, results := make(chan worker.Job, 100), make(chan error)
	return func(ctx context.Context, j worker.Job) error {
		started <- j
		select {
		case err := <-results:
			return err
		case <-ctx.Done(): // a test that failed stops its Pool
			return ctx.Err()
		}
	}, started, results
}

// TestSubmitNoWait checks WithQueueLimit with WithSubmitNoWait: Submit
// beyond the limit returns ErrQueueFull, an offset counted already takes
// no more room, one that is not stored takes none, and room comes back as
// offsets finish.
func TestSubmitNoWait(t *testing.T) {
	t.Parallel()
	rec := newRecorder(worklease.EventProcessed)
	m := newManager(t, worklease.WithObserver(rec))
	h, started, results := gated()
	p := start(t, m.Backend(), h, worker.WithWorkers(1), worker.WithQueueLimit(2), worker.WithSubmitNoWait())
	ctx := context.Background()
	submit := func(d string, off int64, want worklease.AcquireStatus) {
		t.Helper()
		st, err := p.Submit(ctx, d, off, nil)
		require.NoError(t, err, "Submit(%s, %d)", d, off)
		require.Equal(t, want, st, "Submit(%s, %d)", d, off)
	}
	submit("a", 1, worklease.Enqueued)
	submit("a", 2, worklease.Enqueued)
	_, err := p.Submit(ctx, "b", 1, nil)
	require.ErrorIs(t, err, worker.ErrQueueFull)
	submit("a", 2, worklease.AlreadyQueued) // a redelivery: counted already
	j := <-started
	submit("a", 1, worklease.AlreadyAcquired)
	require.Equal(t, 2, p.Stats().Queued)
	results <- nil
	rec.next(t, worklease.EventProcessed)
	eventually(t, func() bool { return p.Stats().Queued == 1 }, "a/1 left the count")
	submit("a", 1, worklease.AlreadyProcessed)
	submit("b", 1, worklease.Enqueued)
	_, err = p.Submit(ctx, "b", 2, nil)
	require.ErrorIs(t, err, worker.ErrQueueFull)
	require.Equal(t, int64(1), j.Offset)
	for range 2 {
		<-started
		results <- nil
	}
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "the count emptied")
}

// TestSubmitWaits checks that Submit at the limit waits until an offset
// finishes, until its context ends, or until the Pool stops.
func TestSubmitWaits(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	h, started, results := gated()
	p := start(t, m.Backend(), h, worker.WithWorkers(1), worker.WithQueueLimit(2))
	ctx := context.Background()
	for off := range int64(2) {
		_, err := p.Submit(ctx, "a", off, nil)
		require.NoError(t, err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := p.Submit(short, "a", 2, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Submit at the limit")

	waited := make(chan error, 1)
	go func() {
		_, err := p.Submit(ctx, "a", 2, nil)
		waited <- err
	}()
	<-started
	results <- nil // a/0 finishes: a/2 finds room
	require.NoError(t, <-waited)
	info, err := m.Inspect("a")
	require.NoError(t, err)
	require.Equal(t, []int64{2}, info.Backlog)
	require.Equal(t, 2, p.Stats().Queued)

	go func() {
		_, err := p.Submit(ctx, "a", 3, nil)
		waited <- err
	}()
	<-started // a/1, held until the Pool stops
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop(ctx) }()
	require.ErrorIs(t, <-waited, worker.ErrStopped)
	results <- nil
	require.NoError(t, <-stopped)
}

// TestQueueLimitOfRetries checks that an offset waiting out a retry's
// delay keeps its place in the count, and one that becomes a dead letter
// leaves it.
func TestQueueLimitOfRetries(t *testing.T) {
	t.Parallel()
	m := newManager(t, worklease.WithMaxRetries(1))
	h, started, results := gated()
	p := start(t, m.Backend(), h, worker.WithWorkers(1), worker.WithBackoff(fastBackoff))
	_, err := p.Submit(context.Background(), "a", 1, nil)
	require.NoError(t, err)
	<-started
	results <- errIgnored
	<-started
	require.Equal(t, 1, p.Stats().Queued, "a retried offset")
	results <- errIgnored
	eventually(t, func() bool { return p.Stats().Queued == 0 }, "the dead letter left the count")
	st := p.Stats()
	require.Equal(t, uint64(1), st.Retried)
	require.Equal(t, uint64(1), st.DeadLettered)
}

// TestDepthFromAnywhere: a Pool that only works counts none of the offsets
// others stored, and reads the depth of the whole backend from it.
func TestDepthFromAnywhere(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	h, started, results := gated()
	p := start(t, m.Backend(), h, worker.WithWorkers(1))
	for off := range int64(5) { // another process's producer
		_, err := m.Enqueue("a", off, nil)
		require.NoError(t, err)
	}
	<-started // a/0 runs
	tot, err := m.Backend().Totals(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(4), tot.Queued, "the backend's depth")
	require.Equal(t, 0, p.Stats().Queued, "the Pool's own count")
	// Every offset runs to its end: a/1 to a/4 are handed over in turn,
	// and one handed over as Stop begins runs too, which the test's
	// cleanup would wait for.
	results <- nil
	for range 4 {
		<-started
		results <- nil
	}
}

// TestAppend: the Pool runs the offsets Append assigns, in order, with
// their payloads; a repeated key stores nothing. While its workers are
// busy, the rest waits in the backend: the Pool claims no more than it
// runs, so it holds no more payloads than that.
func TestAppend(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	h, started, results := gated()
	p := start(t, m.Backend(), h, worker.WithWorkers(2))
	ctx := context.Background()
	for i := range 6 {
		res, err := p.Append(ctx, "a", fmt.Appendf(nil, "email %d", i), worklease.AppendOptions{Key: fmt.Sprint(i)})
		require.NoError(t, err)
		require.Equal(t, worklease.AppendResult{Offset: int64(i), Status: worklease.Enqueued}, res)
	}
	res, err := p.Append(ctx, "a", []byte("email 2"), worklease.AppendOptions{Key: "2"})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Offset, "a repeated key")
	require.NotEqual(t, worklease.Enqueued, res.Status, "a repeated key")
	_, err = p.Append(ctx, "b", []byte("other"), worklease.AppendOptions{})
	require.NoError(t, err)
	got := map[string][]string{}
	for range 2 {
		j := <-started
		got[j.Domain] = append(got[j.Domain], string(j.Payload))
	}
	leases, err := m.Leases()
	require.NoError(t, err)
	require.Len(t, leases, 2, "the Pool claims only for its idle workers")
	tot, err := m.Totals()
	require.NoError(t, err)
	require.Equal(t, int64(5), tot.Queued, "the rest waits in the backend")
	for finished := 0; finished < 7; { // finish each job, and see each start
		select {
		case j := <-started:
			got[j.Domain] = append(got[j.Domain], string(j.Payload))
		case results <- nil:
			finished++
		}
	}
	require.Equal(t, []string{"email 0", "email 1", "email 2", "email 3", "email 4", "email 5"}, got["a"])
	require.Equal(t, []string{"other"}, got["b"])
}
