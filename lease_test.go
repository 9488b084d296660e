package worklease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newManager returns a Manager on a fake clock, and the clock.
func newManager(t *testing.T, opts ...worklease.Option) (*worklease.Manager, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(epoch)
	m, err := worklease.New(append([]worklease.Option{worklease.WithClock(clk)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, worklease.CheckInvariants(m)) })
	return m, clk
}

func acquire(t *testing.T, m *worklease.Manager, domain string, offset int64, want worklease.AcquireStatus) worklease.AcquireResult {
	t.Helper()
	res, err := m.TryAcquire(domain, offset)
	require.NoError(t, err)
	require.Equal(t, want, res.Status, "TryAcquire(%q, %d)", domain, offset)
	return res
}

// The six sanity scenarios of seed 000, in order and almost word for word.

// 1. Happy path: tryAcquire(A,1) → ACQUIRED; succeed(A,token) → NO_BACKLOG.
func TestSanityHappyPath(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)

	res := acquire(t, m, "A", 1, worklease.Acquired)
	require.False(t, res.Token.IsZero())

	sres, err := m.Succeed("A", res.Token)
	require.NoError(t, err)
	require.Equal(t, worklease.SucceedResult{Status: worklease.NoBacklog}, sres)
}

// 2. Queue then orchestrated hand-off: tryAcquire(A,1) → ACQUIRED;
// tryAcquire(A,2) → ENQUEUED; succeed(A,token) → NEXT_HINT(2);
// tryAcquire(A,2) (head matches, popped) → ACQUIRED.
func TestSanityQueueThenHandOff(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	queueThenHandOff(t, m)
}

func queueThenHandOff(t *testing.T, m *worklease.Manager) worklease.AcquireResult {
	t.Helper()
	first := acquire(t, m, "A", 1, worklease.Acquired)
	acquire(t, m, "A", 2, worklease.Enqueued)

	sres, err := m.Succeed("A", first.Token)
	require.NoError(t, err)
	require.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, sres)
	info, err := m.Inspect("A")
	require.NoError(t, err)
	require.Equal(t, []int64{2}, info.Backlog, "the hint does not remove the head")

	second := acquire(t, m, "A", 2, worklease.Acquired)
	info, err = m.Inspect("A")
	require.NoError(t, err)
	require.Empty(t, info.Backlog, "acquiring the head pops it")
	require.Greater(t, second.Token.Fence(), first.Token.Fence())
	return second
}

// 3. Out-of-order acquire (hard bug): after (2), calling tryAcquire(A,3)
// before 2 ⇒ BacklogOrderingException.
func TestSanityOutOfOrderAcquire(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	first := acquire(t, m, "A", 1, worklease.Acquired)
	acquire(t, m, "A", 2, worklease.Enqueued)
	acquire(t, m, "A", 3, worklease.Enqueued)
	_, err := m.Succeed("A", first.Token)
	require.NoError(t, err)
	before, err := m.Inspect("A")
	require.NoError(t, err)

	_, err = m.TryAcquire("A", 3)
	require.ErrorIs(t, err, worklease.ErrBacklogOrder)
	var orderErr *worklease.BacklogOrderError
	require.ErrorAs(t, err, &orderErr)
	require.Equal(t, worklease.BacklogOrderError{Domain: "A", Expected: 2, Got: 3}, *orderErr)

	after, err := m.Inspect("A")
	require.NoError(t, err)
	require.Equal(t, before, after, "the error changed nothing")
	acquire(t, m, "A", 2, worklease.Acquired) // the head is still next
}

// 4. Retry: fail(A,token) (under limit) → RETRY_SCHEDULED(n); lease
// retained; acquiredAtMillis unchanged.
func TestSanityRetry(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t, worklease.WithMaxRetries(2))
	res := acquire(t, m, "A", 1, worklease.Acquired)
	require.Equal(t, epoch, res.AcquiredAt)

	for n := 1; n <= 2; n++ {
		clk.Advance(time.Second)
		fres, err := m.Fail("A", res.Token, errors.New("boom"))
		require.NoError(t, err)
		require.Equal(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: n}, fres)

		again := acquire(t, m, "A", 1, worklease.AlreadyAcquired)
		require.Equal(t, res.Token, again.Token, "lease retained under the same token")
		require.Equal(t, epoch, again.AcquiredAt, "acquiredAt unchanged")
		require.Equal(t, n, again.RetryCount)
	}
}

// 5. Final give-up: after reaching maxRetries, fail(A,token) → GIVE_UP_*;
// lease cleared; offset ∈ failed.
func TestSanityFinalGiveUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		queued  []int64
		want    worklease.FailResult
		backlog []int64
	}{
		{"no backlog", nil, worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: 2}, nil},
		{"next hint", []int64{5, 7}, worklease.FailResult{Status: worklease.GiveUpNextHint, RetryCount: 2, Next: 5}, []int64{5, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, _ := newManager(t, worklease.WithMaxRetries(2))
			res := acquire(t, m, "A", 1, worklease.Acquired)
			for _, off := range tt.queued {
				acquire(t, m, "A", off, worklease.Enqueued)
			}
			for range 2 {
				fres, err := m.Fail("A", res.Token, nil)
				require.NoError(t, err)
				require.Equal(t, worklease.RetryScheduled, fres.Status)
			}

			fres, err := m.Fail("A", res.Token, errors.New("still broken"))
			require.NoError(t, err)
			require.Equal(t, tt.want, fres)

			info, err := m.Inspect("A")
			require.NoError(t, err)
			require.False(t, info.Leased, "lease cleared")
			require.Equal(t, tt.backlog, info.Backlog)
			_, failed := worklease.Terminal(m, "A")
			require.Equal(t, []int64{1}, failed, "offset ∈ failed")
			_, err = m.Succeed("A", res.Token)
			require.ErrorIs(t, err, worklease.ErrNoLease)
		})
	}
}

// 6. Idempotence: once an offset is terminal, any tryAcquire(A,thatOffset)
// returns ALREADY_* and does not re-enqueue.
func TestSanityIdempotence(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, worklease.WithMaxRetries(0))
	done := acquire(t, m, "A", 1, worklease.Acquired)
	_, err := m.Succeed("A", done.Token)
	require.NoError(t, err)
	dead := acquire(t, m, "A", 2, worklease.Acquired)
	fres, err := m.Fail("A", dead.Token, nil)
	require.NoError(t, err)
	require.Equal(t, worklease.GiveUpNoBacklog, fres.Status)

	for _, busy := range []bool{false, true} { // idle, then with another offset in flight
		if busy {
			acquire(t, m, "A", 3, worklease.Acquired)
		}
		acquire(t, m, "A", 1, worklease.AlreadyProcessed)
		acquire(t, m, "A", 2, worklease.AlreadyFailed)
		info, err := m.Inspect("A")
		require.NoError(t, err)
		require.Empty(t, info.Backlog, "terminal offsets are never re-enqueued")
	}
}

func TestEnqueueDeduplicates(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	acquire(t, m, "A", 1, worklease.Acquired)
	for _, off := range []int64{4, 2, 4, 3, 2, 4} {
		acquire(t, m, "A", off, worklease.Enqueued)
	}
	info, err := m.Inspect("A")
	require.NoError(t, err)
	require.Equal(t, []int64{4, 2, 3}, info.Backlog, "FIFO in first-enqueued order, once each")
}

func TestIdleAcquireNeedsNoBacklogOrder(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	// With an empty backlog, any offset may be acquired, even one below
	// those already processed: the contract orders only what is queued.
	for _, off := range []int64{10, 3, 7} {
		res := acquire(t, m, "A", off, worklease.Acquired)
		_, err := m.Succeed("A", res.Token)
		require.NoError(t, err)
	}
	processed, _ := worklease.Terminal(m, "A")
	require.Equal(t, []int64{3, 7, 10}, processed)
}

func TestDomainsAreIndependent(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	a := acquire(t, m, "A", 1, worklease.Acquired)
	b := acquire(t, m, "B", 1, worklease.Acquired)
	require.NotEqual(t, a.Token, b.Token)
	require.Equal(t, a.Token.Fence(), b.Token.Fence(), "fences count per domain")

	_, err := m.Succeed("A", b.Token)
	require.ErrorIs(t, err, worklease.ErrTokenMismatch, "a token is bound to its domain")
	_, err = m.Succeed("B", b.Token)
	require.NoError(t, err)
	acquire(t, m, "A", 1, worklease.AlreadyAcquired)
}

func TestFencesGrowPerDomain(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, worklease.WithMaxRetries(1))
	var last uint64
	seen := map[worklease.Token]bool{}
	for off := range int64(20) {
		res := acquire(t, m, "A", off, worklease.Acquired)
		require.Greater(t, res.Token.Fence(), last)
		require.False(t, seen[res.Token], "token issued twice")
		last, seen[res.Token] = res.Token.Fence(), true
		if off%2 == 0 {
			_, err := m.Succeed("A", res.Token)
			require.NoError(t, err)
		} else {
			for range 2 {
				_, err := m.Fail("A", res.Token, nil)
				require.NoError(t, err)
			}
		}
	}
}

func TestTokensUniqueAcrossManagers(t *testing.T) {
	t.Parallel()
	m1, _ := newManager(t)
	m2, _ := newManager(t)
	t1 := acquire(t, m1, "A", 1, worklease.Acquired).Token
	t2 := acquire(t, m2, "A", 1, worklease.Acquired).Token
	require.Equal(t, t1.Fence(), t2.Fence())
	require.NotEqual(t, t1, t2)
	_, err := m2.Succeed("A", t1)
	require.ErrorIs(t, err, worklease.ErrTokenMismatch)
}

// Every error path: the error is matchable and the domain is unchanged.
func TestErrorsChangeNothing(t *testing.T) {
	t.Parallel()
	type setup struct {
		m   *worklease.Manager
		tok worklease.Token // the current lease's token on "A", offset 1
	}
	tests := []struct {
		name string
		call func(s setup) error
		want error
	}{
		{"succeed on unknown domain", func(s setup) error { _, err := s.m.Succeed("nobody", s.tok); return err }, worklease.ErrNoLease},
		{"fail on unknown domain", func(s setup) error { _, err := s.m.Fail("nobody", s.tok, nil); return err }, worklease.ErrNoLease},
		{"succeed with zero token", func(s setup) error { _, err := s.m.Succeed("A", worklease.Token{}); return err }, worklease.ErrTokenMismatch},
		{"fail with zero token", func(s setup) error { _, err := s.m.Fail("A", worklease.Token{}, nil); return err }, worklease.ErrTokenMismatch},
		{"succeed with forged token", func(s setup) error {
			_, err := s.m.Succeed("A", worklease.RawToken(s.tok.Fence()+1, 1, 1))
			return err
		}, worklease.ErrTokenMismatch},
		{"succeed on idle domain", func(s setup) error {
			_, err := s.m.Succeed("idle", s.tok)
			return err
		}, worklease.ErrNoLease},
		{"fail on idle domain", func(s setup) error {
			_, err := s.m.Fail("idle", s.tok, nil)
			return err
		}, worklease.ErrNoLease},
		{"negative offset", func(s setup) error { _, err := s.m.TryAcquire("A", -1); return err }, worklease.ErrInvalidOffset},
		{"negative offset on idle domain", func(s setup) error { _, err := s.m.TryAcquire("idle", -5); return err }, worklease.ErrInvalidOffset},
		{"out of order on idle domain", func(s setup) error { _, err := s.m.TryAcquire("queued", 9); return err }, worklease.ErrBacklogOrder},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, _ := newManager(t)
			s := setup{m: m, tok: acquire(t, m, "A", 1, worklease.Acquired).Token}
			acquire(t, m, "A", 2, worklease.Enqueued)
			idle := acquire(t, m, "idle", 1, worklease.Acquired)
			_, err := m.Succeed("idle", idle.Token)
			require.NoError(t, err)
			q := acquire(t, m, "queued", 1, worklease.Acquired)
			acquire(t, m, "queued", 2, worklease.Enqueued)
			_, err = m.Succeed("queued", q.Token)
			require.NoError(t, err)
			before := snapshot(t, m, "A", "idle", "queued", "nobody")

			err = tt.call(s)
			require.ErrorIs(t, err, tt.want)
			require.Equal(t, before, snapshot(t, m, "A", "idle", "queued", "nobody"))
		})
	}
}

type domainSnapshot struct {
	Info              worklease.DomainInfo
	Processed, Failed []int64
}

func snapshot(t *testing.T, m *worklease.Manager, domains ...string) map[string]domainSnapshot {
	t.Helper()
	out := map[string]domainSnapshot{}
	for _, d := range domains {
		info, err := m.Inspect(d)
		require.NoError(t, err)
		p, f := worklease.Terminal(m, d)
		out[d] = domainSnapshot{info, p, f}
	}
	return out
}

func TestErrorMessagesNameTheDomain(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	_, err := m.Succeed("orders-17", worklease.Token{})
	require.ErrorContains(t, err, `"orders-17"`)
	require.ErrorContains(t, err, "Succeed")
}

func TestClose(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	res := acquire(t, m, "A", 1, worklease.Acquired)
	require.NoError(t, m.Close())
	require.ErrorIs(t, m.Close(), worklease.ErrClosed)

	_, err := m.TryAcquire("A", 2)
	assert.ErrorIs(t, err, worklease.ErrClosed)
	_, err = m.Succeed("A", res.Token)
	assert.ErrorIs(t, err, worklease.ErrClosed)
	_, err = m.Fail("A", res.Token, nil)
	assert.ErrorIs(t, err, worklease.ErrClosed)
	_, err = m.Inspect("A")
	assert.ErrorIs(t, err, worklease.ErrClosed)
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  worklease.Option
	}{
		{"negative retries", worklease.WithMaxRetries(-1)},
		{"zero shards", worklease.WithShards(0)},
		{"negative shards", worklease.WithShards(-3)},
		{"too many shards", worklease.WithShards(1<<16 + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := worklease.New(tt.opt)
			require.ErrorIs(t, err, worklease.ErrInvalidConfig)
			require.Nil(t, m)
		})
	}
}

func TestNewAcceptsValidOptions(t *testing.T) {
	t.Parallel()
	for _, opts := range [][]worklease.Option{
		nil,
		{nil},
		{worklease.WithMaxRetries(0)},
		{worklease.WithShards(1)},
		{worklease.WithShards(3)},
		{worklease.WithShards(1 << 16)},
		{worklease.WithClock(nil)},
	} {
		m, err := worklease.New(opts...)
		require.NoError(t, err)
		res, err := m.TryAcquire("A", 0)
		require.NoError(t, err)
		require.Equal(t, worklease.Acquired, res.Status)
	}
}

func TestDefaultMaxRetries(t *testing.T) {
	t.Parallel()
	m, err := worklease.New()
	require.NoError(t, err)
	res, err := m.TryAcquire("A", 1)
	require.NoError(t, err)
	for n := 1; n <= worklease.DefaultMaxRetries; n++ {
		fres, err := m.Fail("A", res.Token, nil)
		require.NoError(t, err)
		require.Equal(t, worklease.RetryScheduled, fres.Status)
		require.Equal(t, n, fres.RetryCount)
	}
	fres, err := m.Fail("A", res.Token, nil)
	require.NoError(t, err)
	require.Equal(t, worklease.GiveUpNoBacklog, fres.Status)
}

func TestAcquiredAtIsGrantTime(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t)
	clk.Advance(time.Hour)
	res := acquire(t, m, "A", 1, worklease.Acquired)
	require.Equal(t, epoch.Add(time.Hour), res.AcquiredAt)
	clk.Advance(time.Minute)
	acquire(t, m, "A", 2, worklease.Enqueued)
	_, err := m.Succeed("A", res.Token)
	require.NoError(t, err)
	next := acquire(t, m, "A", 2, worklease.Acquired)
	require.Equal(t, epoch.Add(time.Hour+time.Minute), next.AcquiredAt)
}

func TestStatusStrings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    interface{ String() string }
		want string
	}{
		{worklease.Acquired, "Acquired"},
		{worklease.AlreadyAcquired, "AlreadyAcquired"},
		{worklease.Enqueued, "Enqueued"},
		{worklease.AlreadyProcessed, "AlreadyProcessed"},
		{worklease.AlreadyFailed, "AlreadyFailed"},
		{worklease.AcquireStatus(0), "AcquireStatus(0)"},
		{worklease.AcquireStatus(99), "AcquireStatus(99)"},
		{worklease.NoBacklog, "NoBacklog"},
		{worklease.NextHint, "NextHint"},
		{worklease.NextAcquired, "NextAcquired"},
		{worklease.SucceedStatus(0), "SucceedStatus(0)"},
		{worklease.RetryScheduled, "RetryScheduled"},
		{worklease.GiveUpNoBacklog, "GiveUpNoBacklog"},
		{worklease.GiveUpNextHint, "GiveUpNextHint"},
		{worklease.GiveUpParked, "GiveUpParked"},
		{worklease.GiveUpNextAcquired, "GiveUpNextAcquired"},
		{worklease.FailStatus(0), "FailStatus(0)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.s.String())
	}
}

func TestInspectUnknownDomain(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	info, err := m.Inspect("never-seen")
	require.NoError(t, err)
	require.Equal(t, worklease.DomainInfo{}, info)
	require.Nil(t, worklease.RecordOf(m, "never-seen"), "Inspect creates no record")
}

func TestInspectLease(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	res := acquire(t, m, "A", 4, worklease.Acquired)
	_, err := m.Fail("A", res.Token, nil)
	require.NoError(t, err)
	acquire(t, m, "A", 6, worklease.Enqueued)
	acquire(t, m, "A", 5, worklease.Enqueued)

	info, err := m.Inspect("A")
	require.NoError(t, err)
	require.Equal(t, worklease.DomainInfo{
		Leased:  true,
		Lease:   worklease.LeaseInfo{Domain: "A", Offset: 4, Token: res.Token, AcquiredAt: epoch, RetryCount: 1},
		Backlog: []int64{6, 5},
	}, info)

	info.Backlog[0] = 99 // a copy: changing it changes nothing
	again, err := m.Inspect("A")
	require.NoError(t, err)
	require.Equal(t, []int64{6, 5}, again.Backlog)
}

func TestRecordIsNeverReplaced(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	res := acquire(t, m, "A", 1, worklease.Acquired)
	rec := worklease.RecordOf(m, "A")
	require.NotNil(t, rec)
	_, err := m.Succeed("A", res.Token)
	require.NoError(t, err)
	acquire(t, m, "A", 2, worklease.Acquired)
	require.Same(t, rec, worklease.RecordOf(m, "A"))
}
