package worklease_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/internal/memjournal"
)

// The pull calls as only the in-memory Manager has them; the conformance
// suite's Pull area checks what every backend shares.

// pullNames returns "domain/offset@attempt" for each claim.
func pullNames(cs []worklease.Claim) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s/%d@%d", c.Domain, c.Offset, c.Attempt))
	}
	return out
}

// TestPayloadsJournaled checks that a journaled Manager keeps payloads
// on a journal that gives none back, in memory and in its snapshots: each
// comes back byte for byte after a restart, with and without a snapshot,
// until its offset succeeds; a dead letter keeps its payload for Redrive.
func TestPayloadsJournaled(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j), worklease.WithMaxRetries(0))
	require.NoError(t, err)
	want := map[int64][]byte{1: []byte("x"), 2: {}, 3: nil, 4: {0, 255, '\n'}}
	for off := int64(1); off <= 4; off++ {
		st, err := m.Enqueue("A", off, want[off])
		require.NoError(t, err)
		require.Equal(t, worklease.Enqueued, st)
	}
	cs, err := m.Claim(1)
	require.NoError(t, err)
	_, err = m.Fail("A", cs[0].Token, errors.New("poison")) // A/1 is a dead letter, with its payload
	require.NoError(t, err)
	for _, snap := range []bool{false, true} {
		m, j = r2Restart(t, m, j, snap, worklease.WithMaxRetries(0))
		for off, p := range want {
			got, err := m.Payload("A", off)
			require.NoError(t, err)
			require.Equal(t, p, got, "A/%d's payload after a restart (snapshot %t)", off, snap)
			require.Equal(t, p == nil, got == nil, "A/%d: nil and empty payloads are not the same", off)
		}
	}
	cs, err = m.Claim(5)
	require.NoError(t, err)
	require.Equal(t, []string{"A/2@1"}, pullNames(cs))
	require.Equal(t, []byte{}, cs[0].Payload)
	_, err = m.Succeed("A", cs[0].Token)
	require.NoError(t, err)
	got, err := m.Payload("A", 2)
	require.NoError(t, err)
	require.Nil(t, got, "a payload goes with its offset's success")
	dl, err := m.InspectDeadLetter("A", 1)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), dl.Payload)
}

// TestPayloadsLiveUntilSuccess checks where payloads live: in the domains
// that have them, from Enqueue until the offset succeeds.
func TestPayloadsLiveUntilSuccess(t *testing.T) {
	t.Parallel()
	m, err := worklease.New(worklease.WithMaxRetries(0))
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Enqueue("plain", 1, nil)
	require.NoError(t, err)
	assert.False(t, worklease.HasColdPart(m, "plain"), "an offset without a payload needs no cold part")
	_, err = m.Enqueue("A", 1, []byte("one"))
	require.NoError(t, err)
	_, err = m.Enqueue("A", 2, []byte("two"))
	require.NoError(t, err)
	require.True(t, worklease.HasColdPart(m, "A"))

	claim := func(want string) worklease.Claim {
		t.Helper()
		cs, err := m.Claim(1)
		require.NoError(t, err)
		require.Equal(t, []string{want}, pullNames(cs))
		return cs[0]
	}
	c := claim("plain/1@1")
	_, err = m.Succeed(c.Domain, c.Token)
	require.NoError(t, err)
	c = claim("A/1@1")
	res, err := m.Retry("A", c.Token, errors.New("poison"), 0) // out of retries: a dead letter
	require.NoError(t, err)
	require.True(t, res.DeadLettered)
	c = claim("A/2@1")
	require.Equal(t, []byte("two"), c.Payload)
	_, err = m.Succeed("A", c.Token)
	require.NoError(t, err)
	require.True(t, worklease.HasColdPart(m, "A"), "the dead letter keeps its payload")
	_, err = m.Redrive("A", 1)
	require.NoError(t, err)
	c = claim("A/1@1")
	require.Equal(t, []byte("one"), c.Payload)
	_, err = m.Succeed("A", c.Token)
	require.NoError(t, err)
	assert.False(t, worklease.HasColdPart(m, "A"), "payloads go when their offsets succeed")
	require.NoError(t, worklease.CheckInvariants(m))
}

// TestClaimListsDomainsReadyBefore checks that the first pull call lists
// the domains that became ready before it, by TryAcquire and Succeed, and
// that a Manager that never pulls keeps no ready queue.
func TestClaimListsDomainsReadyBefore(t *testing.T) {
	t.Parallel()
	m, err := worklease.New()
	require.NoError(t, err)
	defer m.Close()
	for _, d := range []string{"a", "b"} {
		res, err := m.TryAcquire(d, 1)
		require.NoError(t, err)
		_, err = m.TryAcquire(d, 2)
		require.NoError(t, err)
		_, err = m.Succeed(d, res.Token)
		require.NoError(t, err)
	}
	require.False(t, worklease.Pulling(m), "a Manager that never pulled keeps a ready queue")
	require.NoError(t, worklease.CheckInvariants(m))
	cs, err := m.Claim(5)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a/2@1", "b/2@1"}, pullNames(cs))
	require.True(t, worklease.Pulling(m))
	require.NoError(t, worklease.CheckInvariants(m))
}

// TestRetryDelayAfterRestart checks what Retry journals: the failed attempt
// and the requeue, with the delay's end, which a restart replays, with and
// without a snapshot: the offset is claimed once the delay is over, not
// before.
func TestRetryDelayAfterRestart(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j), worklease.WithClock(clk))
	require.NoError(t, err)
	_, err = m.Enqueue("A", 1, nil)
	require.NoError(t, err)
	cs, err := m.Claim(1)
	require.NoError(t, err)
	res, err := m.Retry("A", cs[0].Token, errors.New("flaky"), time.Hour)
	require.NoError(t, err)
	require.Equal(t, worklease.RetryResult{RetryCount: 1}, res)
	none, err := m.Claim(1)
	require.NoError(t, err)
	require.Empty(t, none, "claimed before the delay ended")
	before := r2Dump(t, m)

	for _, snap := range []bool{false, true} {
		m, j = r2Restart(t, m, j, snap, worklease.WithClock(clk))
		require.Equal(t, before, r2Dump(t, m), "the state after a restart (snapshot %t)", snap)
	}
	defer m.Close()
	none, err = m.Claim(1)
	require.NoError(t, err)
	require.Empty(t, none, "claimed after a restart before the delay ended")
	clk.Advance(time.Hour)
	cs, err = m.Claim(1)
	require.NoError(t, err)
	require.Equal(t, []string{"A/1@2"}, pullNames(cs), "the retried offset after a restart")
	_, err = m.Succeed("A", cs[0].Token)
	require.NoError(t, err)
}

// TestWaitClaimWakesWhenDelayEnds checks that WaitClaim wakes when the
// earliest retry delay ends, on the system clock, well before its poll.
func TestWaitClaimWakesWhenDelayEnds(t *testing.T) {
	t.Parallel()
	m, err := worklease.New()
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Enqueue("A", 1, nil)
	require.NoError(t, err)
	cs, err := m.Claim(1)
	require.NoError(t, err)
	const delay = 50 * time.Millisecond
	start := time.Now()
	_, err = m.Retry("A", cs[0].Token, nil, delay)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err = m.WaitClaim(ctx, 1, time.Hour)
	require.NoError(t, err)
	require.Equal(t, []string{"A/1@2"}, pullNames(cs))
	require.GreaterOrEqual(t, time.Since(start), delay, "claimed before the delay ended")
}

// TestWaitClaimWakesOneWaiterPerDomain checks that the waiting claims
// share the domains that become ready: each wakes for one, and a claim
// that comes back full wakes the next, so that every domain is claimed.
func TestWaitClaimWakesOneWaiterPerDomain(t *testing.T) {
	t.Parallel()
	m, err := worklease.New()
	require.NoError(t, err)
	defer m.Close()
	const waiters = 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan []worklease.Claim, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			cs, err := m.WaitClaim(ctx, 1, time.Hour)
			assert.NoError(t, err)
			got <- cs
		})
	}
	for i := range waiters {
		_, err := m.Enqueue(fmt.Sprintf("d%d", i), 1, nil)
		require.NoError(t, err)
	}
	wg.Wait()
	close(got)
	var domains []string
	for cs := range got {
		require.Len(t, cs, 1)
		domains = append(domains, cs[0].Domain)
	}
	require.ElementsMatch(t, []string{"d0", "d1", "d2", "d3"}, domains)
}

// TestWaitClaimLeavingPassesWakeUpOn: a waiting claim whose ctx ends
// after a wake-up reached it, before it claimed, passes the wake-up on to
// another waiting claim, which takes the domain at once rather than after
// its poll. One processor makes the order sure: the wake-up goes to the
// first waiter, whose ctx ends before it runs.
func TestWaitClaimLeavingPassesWakeUpOn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	m, err := worklease.New()
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Claim(1) // the queue of ready domains exists from the first pull call
	require.NoError(t, err)
	ctx1, cancel1 := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := m.WaitClaim(ctx1, 1, time.Hour); first <- err }()
	time.Sleep(50 * time.Millisecond)
	second := make(chan []worklease.Claim, 1)
	go func() {
		cs, err := m.WaitClaim(context.Background(), 1, time.Hour)
		assert.NoError(t, err)
		second <- cs
	}()
	time.Sleep(50 * time.Millisecond)
	_, err = m.Enqueue("a", 1, nil) // wakes the first waiter
	require.NoError(t, err)
	cancel1() // before it runs
	require.ErrorIs(t, <-first, context.Canceled)
	select {
	case cs := <-second:
		require.Len(t, cs, 1)
		require.Equal(t, "a", cs[0].Domain)
	case <-time.After(5 * time.Second):
		t.Fatal("the second waiting claim was not woken, though a/1 is ready")
	}
}

// TestPullClosed checks the pull calls of a closed Manager and of a zero
// one.
func TestPullClosed(t *testing.T) {
	t.Parallel()
	for name, m := range map[string]*worklease.Manager{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			_, err := m.Enqueue("A", 1, nil)
			require.ErrorIs(t, err, worklease.ErrClosed)
			_, err = m.Claim(1)
			require.ErrorIs(t, err, worklease.ErrClosed)
			_, err = m.WaitClaim(context.Background(), 1, 0)
			require.ErrorIs(t, err, worklease.ErrClosed)
			_, err = m.Retry("A", worklease.Token{}, nil, 0)
			require.ErrorIs(t, err, worklease.ErrClosed)
			_, err = m.SucceedMany(nil)
			require.ErrorIs(t, err, worklease.ErrClosed)
		})
	}
	m, err := worklease.New()
	require.NoError(t, err)
	require.NoError(t, m.Close())
	_, err = m.WaitClaim(context.Background(), 1, 0)
	require.ErrorIs(t, err, worklease.ErrClosed)
}

// TestWaitClaimEndsWhenJournalFails checks that a waiting claim learns at
// once that the journal failed, from another call's failure.
func TestWaitClaimEndsWhenJournalFails(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j))
	require.NoError(t, err)
	defer m.Close()
	done := make(chan error, 1)
	go func() {
		_, err := m.WaitClaim(context.Background(), 1, time.Hour)
		done <- err
	}()
	j.FailWaits()
	_, err = m.TryAcquire("A", 1)
	require.ErrorIs(t, err, worklease.ErrJournalFailed)
	select {
	case err := <-done:
		require.ErrorIs(t, err, worklease.ErrJournalFailed)
	case <-time.After(30 * time.Second):
		t.Fatal("WaitClaim was not woken")
	}
}

// TestPullConcurrentInvariants runs producers, claimers and an operator at
// once on few domains, under the race detector, and checks the Manager's
// invariants, the ready queue's among them, once they are done.
func TestPullConcurrentInvariants(t *testing.T) {
	t.Parallel()
	m, err := worklease.New(worklease.WithMaxRetries(2), worklease.WithLeaseTTL(time.Minute), worklease.WithShards(2))
	require.NoError(t, err)
	defer m.Close()
	const rounds = 300
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Go(func() {
			for i := range rounds {
				_, err := m.Enqueue(fmt.Sprintf("d%d", i%5), int64(i/5*2+p), nil)
				assert.NoError(t, err)
			}
		})
	}
	for w := range 3 {
		wg.Go(func() {
			for i := range rounds {
				cs, err := m.Claim(1 + i%3)
				assert.NoError(t, err)
				for j, c := range cs {
					switch (i + j + w) % 4 {
					case 0:
						_, err = m.Retry(c.Domain, c.Token, nil, time.Duration(i%2)*time.Millisecond)
					case 1:
						_, err = m.SucceedNext(c.Domain, c.Token)
					default:
						_, err = m.Succeed(c.Domain, c.Token)
					}
					// The operator's ForceRelease may come first: the holder
					// learns so, or, once the domain's lease was revoked
					// again, that its token is no longer the lease's.
					if !errors.Is(err, worklease.ErrLeaseRevoked) && !errors.Is(err, worklease.ErrTokenMismatch) &&
						!errors.Is(err, worklease.ErrNoLease) {
						assert.NoError(t, err)
					}
				}
			}
		})
	}
	wg.Go(func() {
		for i := range rounds {
			d := fmt.Sprintf("d%d", i%5)
			switch i % 3 {
			case 0:
				_ = m.Pause(d)
			case 1:
				_, _ = m.Resume(d)
			default:
				_, _ = m.ForceRelease(d)
			}
		}
	})
	wg.Wait()
	for i := range 5 {
		_, err := m.Resume(fmt.Sprintf("d%d", i))
		require.NoError(t, err)
	}
	require.NoError(t, worklease.CheckInvariants(m))
}
