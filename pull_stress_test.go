package worklease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
)

// TestPullStress runs waiting claims, hand-offs (with a domain named twice
// in a batch), retries and batch completions for two seconds beside the
// admin calls and Reap, under a lease TTL of 3ms, then checks the
// invariants and that everything drains.
func TestPullStress(t *testing.T) {
	m := newEdgeManager(t, worklease.WithMaxRetries(1), worklease.WithLeaseTTL(3*time.Millisecond), worklease.WithShards(2))
	const D = 6
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []error
	okErr := func(err error) bool {
		return err == nil || errors.Is(err, worklease.ErrLeaseRevoked) || errors.Is(err, worklease.ErrTokenMismatch) ||
			errors.Is(err, worklease.ErrNoLease) || errors.Is(err, worklease.ErrLeaseExpired)
	}
	note := func(err error) {
		if !okErr(err) {
			mu.Lock()
			bad = append(bad, err)
			mu.Unlock()
		}
	}
	wg.Go(func() {
		for i := 0; ctx.Err() == nil && i < 3000; i++ {
			_, err := m.Enqueue(fmt.Sprint("d", i%D), int64(i), []byte{byte(i)})
			if errors.Is(err, worklease.ErrPayloadMismatch) {
				// Kill failed the offset before it arrived (and Redrive may
				// have queued it again), with no payload: the contract
				// refuses it with one.
				continue
			}
			note(err)
		}
	})
	for w := range 4 {
		wg.Go(func() {
			var held []worklease.Claim
			for i := 0; ctx.Err() == nil; i++ {
				if len(held) == 0 {
					wctx, c := context.WithTimeout(ctx, 5*time.Millisecond)
					cs, err := m.WaitClaim(wctx, 1+i%3, time.Millisecond)
					c()
					if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						note(err)
					}
					held = cs
					continue
				}
				switch (i + w) % 3 {
				case 0:
					for _, c := range held {
						_, err := m.Retry(c.Domain, c.Token, errors.New("x"), time.Duration(i%3)*time.Millisecond)
						note(err)
					}
					held = nil
				case 1:
					next, errs, err := m.ClaimNext(append(held, held...)) // duplicates too
					note(err)
					for _, e := range errs {
						note(e)
					}
					held = next
				default:
					errs, err := m.SucceedMany(held)
					note(err)
					for _, e := range errs {
						note(e)
					}
					held = nil
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			d := fmt.Sprint("d", i%D)
			switch i % 7 {
			case 0:
				_ = m.Pause(d)
			case 1:
				_, _ = m.Resume(d)
			case 2:
				_, _ = m.ForceRelease(d)
			case 3:
				_, _ = m.Kill(d, int64(i%3000), "k")
			case 4:
				_, _ = m.Redrive(d, int64((i+1)%3000))
			case 5:
				_ = m.Forget(d)
			case 6:
				_, _ = m.Reap()
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
	wg.Wait()
	require.NoError(t, errors.Join(bad...))
	require.NoError(t, worklease.CheckInvariants(m))
	// Quiesce: resume all, let leases expire, drain with Claim.
	for i := range D {
		_, err := m.Resume(fmt.Sprint("d", i))
		require.NoError(t, err)
	}
	time.Sleep(10 * time.Millisecond)
	// The drain ends when nothing is left; the deadline is a failure's. A
	// loaded machine may let many of the 3ms leases expire before their
	// SucceedMany, each then claimed again.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		cs, err := m.Claim(100)
		require.NoError(t, err)
		if len(cs) == 0 {
			if _, err := m.Reap(); err != nil {
				t.Fatal(err)
			}
			cs, _ = m.Claim(100)
			if len(cs) == 0 {
				break
			}
		}
		_, err = m.SucceedMany(cs)
		require.NoError(t, err)
	}
	require.NoError(t, worklease.CheckInvariants(m))
	for i := range D {
		info, err := m.Inspect(fmt.Sprint("d", i))
		require.NoError(t, err)
		require.Empty(t, info.Backlog, "d%d: %+v", i, info)
		require.False(t, info.Leased)
	}
}
