package worklease_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
)

// The pull calls at their edges: bad inputs, foreign and stale tokens,
// batches that name a domain twice, and the admin calls in between.

// newEdgeManager returns a Manager with opts, closed when t ends.
func newEdgeManager(t *testing.T, opts ...worklease.Option) *worklease.Manager {
	t.Helper()
	m, err := worklease.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// requireInvariants fails t if m's state breaks an invariant.
func requireInvariants(t *testing.T, m *worklease.Manager) {
	t.Helper()
	require.NoError(t, worklease.CheckInvariants(m))
}

// TestPullEdgeBadInputs: counts out of range, invalid domains and offsets
// and negative delays get their errors and change nothing.
func TestPullEdgeBadInputs(t *testing.T) {
	m := newEdgeManager(t)
	for _, n := range []int{0, -1, math.MinInt} {
		_, err := m.Claim(n)
		require.ErrorIs(t, err, worklease.ErrInvalidClaim)
		_, err = m.WaitClaim(context.Background(), n, 0)
		require.ErrorIs(t, err, worklease.ErrInvalidClaim)
	}
	cs, err := m.Claim(math.MaxInt)
	require.NoError(t, err)
	require.Empty(t, cs)
	long := string(make([]byte, worklease.MaxDomainLen+1))
	for _, d := range []string{"", long} {
		_, err = m.Enqueue(d, 1, nil)
		require.ErrorIs(t, err, worklease.ErrInvalidDomain)
		_, err = m.Retry(d, worklease.Token{}, nil, 0)
		require.ErrorIs(t, err, worklease.ErrInvalidDomain)
	}
	_, err = m.Enqueue("a", -1, nil)
	require.ErrorIs(t, err, worklease.ErrInvalidOffset)
	_, err = m.Enqueue("a", math.MaxInt64, []byte{})
	require.NoError(t, err)
	_, err = m.Enqueue(string(make([]byte, worklease.MaxDomainLen)), 0, nil)
	require.NoError(t, err)
	cs, err = m.Claim(math.MaxInt)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	errs, err := m.SucceedMany([]worklease.Claim{{Domain: ""}, {Domain: long}, cs[0], {Domain: "nope"}, cs[1]})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], worklease.ErrInvalidDomain)
	require.ErrorIs(t, errs[1], worklease.ErrInvalidDomain)
	require.NoError(t, errs[2])
	require.ErrorIs(t, errs[3], worklease.ErrNoLease)
	require.NoError(t, errs[4])
	// Retry with negative delay on a claim: refused, lease kept.
	_, err = m.Enqueue("b", 1, nil)
	require.NoError(t, err)
	cs, err = m.Claim(1)
	require.NoError(t, err)
	_, err = m.Retry("b", cs[0].Token, errors.New("x"), -1)
	require.ErrorIs(t, err, worklease.ErrInvalidDuration)
	info, err := m.Inspect("b")
	require.NoError(t, err)
	require.True(t, info.Leased)
	// nil and empty batches.
	next, errs, err := m.ClaimNext(nil)
	require.NoError(t, err)
	require.Empty(t, next)
	require.Empty(t, errs)
	requireInvariants(t, m)
}

// Tokens of another Manager, same domain and fence: refused everywhere.
func TestPullEdgeForeignToken(t *testing.T) {
	m1, m2 := newEdgeManager(t), newEdgeManager(t)
	for _, m := range []*worklease.Manager{m1, m2} {
		for off := range int64(3) {
			_, err := m.Enqueue("a", off, nil)
			require.NoError(t, err)
		}
	}
	c1, err := m1.Claim(1)
	require.NoError(t, err)
	c2, err := m2.Claim(1)
	require.NoError(t, err)
	require.Equal(t, c1[0].Token.Fence(), c2[0].Token.Fence())
	errs, err := m1.SucceedMany(c2)
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], worklease.ErrTokenMismatch)
	next, errs, err := m1.ClaimNext(c2)
	require.NoError(t, err)
	require.Empty(t, next)
	require.ErrorIs(t, errs[0], worklease.ErrTokenMismatch)
	_, err = m1.Retry("a", c2[0].Token, nil, 0)
	require.ErrorIs(t, err, worklease.ErrTokenMismatch)
	info, _ := m1.Inspect("a")
	require.Equal(t, c1[0].Token, info.Lease.Token)
	require.Zero(t, info.Processed)
	requireInvariants(t, m1)
}

// The same claim twice in one batch, short (<=16) and long batches.
func TestPullEdgeDuplicateClaimsInBatch(t *testing.T) {
	for _, pad := range []int{0, 20} {
		t.Run(fmt.Sprint(pad), func(t *testing.T) {
			m := newEdgeManager(t)
			for off := range int64(3) {
				_, err := m.Enqueue("a", off, nil)
				require.NoError(t, err)
			}
			for i := range pad {
				_, err := m.Enqueue(fmt.Sprint("p", i), 0, nil)
				require.NoError(t, err)
			}
			cs, err := m.Claim(1 + pad)
			require.NoError(t, err)
			var a worklease.Claim
			var batch []worklease.Claim
			for _, c := range cs {
				if c.Domain == "a" {
					a = c
				}
			}
			batch = append(batch, a)
			for _, c := range cs {
				if c.Domain != "a" {
					batch = append(batch, c)
				}
			}
			batch = append(batch, a)
			next, errs, err := m.ClaimNext(batch)
			require.NoError(t, err)
			require.NoError(t, errs[0])
			require.ErrorIs(t, errs[len(errs)-1], worklease.ErrTokenMismatch, "the duplicate must not end the next lease")
			var na *worklease.Claim
			for i := range next {
				if next[i].Domain == "a" {
					na = &next[i]
				}
			}
			require.NotNil(t, na)
			require.Equal(t, int64(1), na.Offset)
			info, err := m.Inspect("a")
			require.NoError(t, err)
			require.EqualValues(t, 1, info.Processed)
			require.True(t, info.Leased)
			require.Equal(t, na.Token, info.Lease.Token)
			// And the spent claim first: a ClaimNext repeated, answered with
			// the next lease, which the claim after it then ends: the answer
			// leaves that lease out, and nothing else is granted.
			next2, errs, err := m.ClaimNext([]worklease.Claim{a, *na})
			require.NoError(t, err)
			require.NoError(t, errs[0])
			require.NoError(t, errs[1])
			require.Empty(t, next2)
			info, err = m.Inspect("a")
			require.NoError(t, err)
			require.EqualValues(t, 2, info.Processed)
			require.False(t, info.Leased)
			cs, err = m.Claim(100)
			require.NoError(t, err)
			require.Len(t, cs, 1)
			require.Equal(t, int64(2), cs[0].Offset)
			requireInvariants(t, m)
		})
	}
}

// Expired and force-released claims at the end of an attempt.
func TestPullEdgeExpiredAndRevokedClaims(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	m := newEdgeManager(t, worklease.WithClock(clk), worklease.WithLeaseTTL(time.Second), worklease.WithMaxRetries(5))
	for _, d := range []string{"a", "b", "c"} {
		for off := range int64(2) {
			_, err := m.Enqueue(d, off, []byte(d))
			require.NoError(t, err)
		}
	}
	cs, err := m.Claim(3)
	require.NoError(t, err)
	require.Len(t, cs, 3)
	_, err = m.ForceRelease("b")
	require.NoError(t, err)
	clk.Advance(2 * time.Second) // all expire
	next, errs, err := m.ClaimNext(cs)
	require.NoError(t, err)
	require.Empty(t, next)
	for i, e := range errs {
		if cs[i].Domain == "b" {
			require.ErrorIs(t, e, worklease.ErrLeaseRevoked)
		} else {
			require.ErrorIs(t, e, worklease.ErrLeaseExpired)
		}
	}
	_, err = m.Retry("a", cs[0].Token, errors.New("x"), 0)
	require.Error(t, err)
	again, err := m.Claim(10)
	require.NoError(t, err)
	require.Len(t, again, 3)
	for _, c := range again {
		require.Equal(t, int64(0), c.Offset)
		require.Equal(t, 2, c.Attempt, "%s", c.Domain)
		require.Equal(t, []byte(c.Domain), c.Payload)
	}
	requireInvariants(t, m)
}

// Retry's delay of offset 0; then Pause/Resume ends it (documented).
func TestPullEdgeRetryDelayPauseResume(t *testing.T) {
	m := newEdgeManager(t)
	_, err := m.Enqueue("a", 0, nil)
	require.NoError(t, err)
	cs, err := m.Claim(1)
	require.NoError(t, err)
	_, err = m.Retry("a", cs[0].Token, errors.New("x"), math.MaxInt64)
	require.NoError(t, err)
	cs, err = m.Claim(1)
	require.NoError(t, err)
	require.Empty(t, cs)
	require.ErrorIs(t, m.Forget("a"), worklease.ErrDomainBusy)
	require.NoError(t, m.Pause("a"))
	cs, err = m.Claim(1)
	require.NoError(t, err)
	require.Empty(t, cs)
	_, err = m.Resume("a")
	require.NoError(t, err)
	cs, err = m.Claim(1)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, 2, cs[0].Attempt)
	requireInvariants(t, m)
}

// ClaimNext on a domain paused while leased: no next; Resume makes it
// ready; WaitClaim wakes for it.
func TestPullEdgeClaimNextPausedAndWake(t *testing.T) {
	m := newEdgeManager(t)
	for off := range int64(3) {
		_, err := m.Enqueue("a", off, nil)
		require.NoError(t, err)
	}
	cs, err := m.Claim(1)
	require.NoError(t, err)
	require.NoError(t, m.Pause("a"))
	next, errs, err := m.ClaimNext(cs)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.Empty(t, next)
	got := waitClaim(m)
	time.Sleep(20 * time.Millisecond)
	_, err = m.Resume("a")
	require.NoError(t, err)
	requireWoken(t, got, 1, "Resume")
	// Kill the in-flight offset: its claim then gets an error; Redrive wakes
	// a waiting claim.
	info, err := m.Inspect("a")
	require.NoError(t, err)
	_, err = m.Kill("a", info.Lease.Offset, "k")
	require.NoError(t, err)
	errs, err = m.SucceedMany([]worklease.Claim{{Domain: "a", Token: info.Lease.Token}})
	require.NoError(t, err)
	require.Error(t, errs[0])
	c2, err := m.Claim(1) // offset 2
	require.NoError(t, err)
	require.Len(t, c2, 1)
	_, errs, err = m.ClaimNext(c2)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	got = waitClaim(m)
	time.Sleep(20 * time.Millisecond)
	_, err = m.Redrive("a", 1)
	require.NoError(t, err)
	requireWoken(t, got, 1, "Redrive")
	requireInvariants(t, m)
}

// WaitClaim with a cancelled ctx, and Close while waiting.
func TestPullEdgeWaitClaimCtxAndClose(t *testing.T) {
	m := newEdgeManager(t)
	_, err := m.Enqueue("a", 0, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cs, err := m.WaitClaim(ctx, 1, 0)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, cs)
	info, err := m.Inspect("a")
	require.NoError(t, err)
	require.False(t, info.Leased)

	m2 := newEdgeManager(t)
	errc := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := m2.WaitClaim(context.Background(), 1, time.Hour)
			errc <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, m2.Close())
	for range 3 {
		select {
		case err := <-errc:
			require.ErrorIs(t, err, worklease.ErrClosed)
		case <-time.After(time.Minute):
			t.Fatal("WaitClaim not ended by Close")
		}
	}
	// Closed before the first pull call.
	m3 := newEdgeManager(t)
	require.NoError(t, m3.Close())
	_, err = m3.WaitClaim(context.Background(), 1, time.Hour)
	require.ErrorIs(t, err, worklease.ErrClosed)
}

// Forget of a domain after it was listed and drained; the domain comes back.
func TestPullEdgeForgetRelist(t *testing.T) {
	m := newEdgeManager(t)
	_, err := m.Enqueue("a", 0, nil)
	require.NoError(t, err)
	cs, err := m.Claim(1)
	require.NoError(t, err)
	_, _, err = m.ClaimNext(cs)
	require.NoError(t, err)
	require.NoError(t, m.Forget("a"))
	_, err = m.Enqueue("a", 0, nil)
	require.NoError(t, err)
	cs2, err := m.Claim(5)
	require.NoError(t, err)
	require.Len(t, cs2, 1)
	require.Greater(t, cs2[0].Token.Fence(), cs[0].Token.Fence())
	// The old claim must not touch the new domain.
	errs, err := m.SucceedMany(cs)
	require.NoError(t, err)
	require.Error(t, errs[0])
	requireInvariants(t, m)
}

// A waited claim is what a WaitClaim of waitClaim returned.
type waited struct {
	claims []worklease.Claim
	err    error
}

// waitClaim starts a WaitClaim of up to 5 domains, with a poll of an hour,
// and returns the channel its answer comes on.
// requireWoken waits for the claim of got, a waiting claim that a call
// (by) woke, and checks it leased offset.
func requireWoken(t *testing.T, got <-chan waited, offset int64, by string) {
	t.Helper()
	select {
	case w := <-got:
		require.NoError(t, w.err)
		require.Len(t, w.claims, 1)
		require.Equal(t, offset, w.claims[0].Offset)
	case <-time.After(time.Minute):
		t.Fatal("WaitClaim not woken by " + by)
	}
}

func waitClaim(m *worklease.Manager) <-chan waited {
	got := make(chan waited, 1)
	go func() {
		cs, err := m.WaitClaim(context.Background(), 5, time.Hour)
		got <- waited{cs, err}
	}()
	return got
}
