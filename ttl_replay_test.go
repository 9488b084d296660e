package worklease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/internal/memjournal"
)

// Tests of a lease that replay restores into a Manager whose WithLeaseTTL
// differs from the one that granted it. A lease's expiry belongs to the
// lease: every call must tell the same story about it.

// reopen builds a Manager on j, which a previous Manager closed, with clk and
// opts, and closes it when the test ends.
func reopen(t *testing.T, j *memjournal.Journal, clk *clock.Fake, opts ...worklease.Option) *worklease.Manager {
	t.Helper()
	m, err := worklease.New(append([]worklease.Option{worklease.WithJournal(j.Reopen()), worklease.WithClock(clk)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, worklease.CheckInvariants(m))
		_ = m.Close()
	})
	return m
}

// grantAndClose grants offset 1 of domain "a" on a Manager built on a new
// journal with opts, closes it, and returns the journal and the grant.
func grantAndClose(t *testing.T, clk *clock.Fake, opts ...worklease.Option) (*memjournal.Journal, worklease.AcquireResult) {
	t.Helper()
	j := &memjournal.Journal{}
	m, err := worklease.New(append([]worklease.Option{worklease.WithJournal(j), worklease.WithClock(clk)}, opts...)...)
	require.NoError(t, err)
	res := acquire(t, m, "a", 1, worklease.Acquired)
	require.NoError(t, m.Close())
	return j, res
}

// leaseOf returns the one lease m reports.
func leaseOf(t *testing.T, m *worklease.Manager) worklease.LeaseInfo {
	t.Helper()
	leases, err := m.Leases()
	require.NoError(t, err)
	require.Len(t, leases, 1)
	return leases[0]
}

// A lease granted under WithLeaseTTL keeps its expiry when the journal is
// replayed into a Manager without the option, and every call honours it.
func TestRestoredExpiryWithoutTTL(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	t.Run("Leases", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk, worklease.WithLeaseTTL(ttl))
		require.Equal(t, epoch.Add(ttl), res.ExpiresAt)
		m := reopen(t, j, clk)
		require.True(t, leaseOf(t, m).ExpiresAt.Equal(epoch.Add(ttl)))
		require.True(t, inspect(t, m, "a").Lease.ExpiresAt.Equal(epoch.Add(ttl)))
	})
	t.Run("Extend", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk, worklease.WithLeaseTTL(ttl))
		m := reopen(t, j, clk)
		at, err := m.Extend("a", res.Token, time.Hour)
		require.NoError(t, err)
		require.True(t, at.Equal(epoch.Add(time.Hour)), "Extend returns the renewed expiry, not %v", at)
		require.True(t, leaseOf(t, m).ExpiresAt.Equal(at))
		clk.Advance(ttl + time.Second)
		exp, err := m.Reap()
		require.NoError(t, err)
		require.Empty(t, exp, "the extended lease is not due")
		require.NoError(t, m.Close())

		// The extension is journaled: the next replay agrees, and the lease
		// still succeeds past its first expiry.
		m = reopen(t, j, clk)
		require.True(t, leaseOf(t, m).ExpiresAt.Equal(epoch.Add(time.Hour)))
		_, err = m.Succeed("a", res.Token)
		require.NoError(t, err)
	})
	t.Run("Reap", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk, worklease.WithLeaseTTL(ttl))
		m := reopen(t, j, clk)
		clk.Advance(ttl + time.Second)
		exp, err := m.Reap()
		require.NoError(t, err)
		require.Len(t, exp, 1, "a dead holder's restored lease is reaped")
		require.Equal(t, "a", exp[0].Domain)
		require.Equal(t, res.Token, exp[0].Token)
		leases, err := m.Leases()
		require.NoError(t, err)
		require.Empty(t, leases)
		_, err = m.Succeed("a", res.Token)
		require.ErrorIs(t, err, worklease.ErrLeaseExpired)
		// The offset is granted again, under a lease that never expires.
		again := acquire(t, m, "a", 1, worklease.Acquired)
		require.Zero(t, again.ExpiresAt)
		require.Equal(t, 1, again.RetryCount)
	})
	t.Run("Succeed", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk, worklease.WithLeaseTTL(ttl))
		m := reopen(t, j, clk)
		clk.Advance(ttl)
		_, err := m.Succeed("a", res.Token)
		require.ErrorIs(t, err, worklease.ErrLeaseExpired, "the lease expires on touch")
	})
	t.Run("Fail", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk, worklease.WithLeaseTTL(ttl))
		m := reopen(t, j, clk)
		clk.Advance(ttl / 2)
		fres, err := m.Fail("a", res.Token, errors.New("boom"))
		require.NoError(t, err)
		require.Equal(t, worklease.RetryScheduled, fres.Status)
		require.True(t, leaseOf(t, m).ExpiresAt.Equal(epoch.Add(ttl)), "a retry keeps the lease's expiry")
		clk.Advance(ttl / 2)
		exp, err := m.Reap()
		require.NoError(t, err)
		require.Len(t, exp, 1)
		require.Equal(t, 2, exp[0].Attempts)
	})
}

// A lease granted without WithLeaseTTL gets an expiry one TTL after New when
// the journal is replayed into a Manager with the option. The expiry is
// journaled, so that every later replay agrees, with or without the option.
func TestRestoredLeaseWithoutExpiryUnderTTL(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	opened := epoch.Add(5 * time.Second) // when the Manager with a TTL is built
	t.Run("Leases", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk)
		require.Zero(t, res.ExpiresAt)
		clk.Set(opened)
		m := reopen(t, j, clk, worklease.WithLeaseTTL(ttl))
		require.True(t, leaseOf(t, m).ExpiresAt.Equal(opened.Add(ttl)))
		again := acquire(t, m, "a", 1, worklease.AlreadyAcquired)
		require.True(t, again.ExpiresAt.Equal(opened.Add(ttl)))
		require.NoError(t, m.Close())

		// Replayed later, with the option or without, the lease keeps the
		// expiry it got, not one a TTL after that replay.
		clk.Advance(ttl / 2)
		m = reopen(t, j, clk, worklease.WithLeaseTTL(ttl))
		require.True(t, leaseOf(t, m).ExpiresAt.Equal(opened.Add(ttl)))
		require.NoError(t, m.Close())
		m = reopen(t, j, clk)
		require.True(t, leaseOf(t, m).ExpiresAt.Equal(opened.Add(ttl)))
	})
	t.Run("Extend", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk)
		clk.Set(opened)
		m := reopen(t, j, clk, worklease.WithLeaseTTL(ttl))
		at, err := m.Extend("a", res.Token, time.Hour)
		require.NoError(t, err)
		require.True(t, at.Equal(opened.Add(time.Hour)))
	})
	t.Run("Reap", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk)
		clk.Set(opened)
		m := reopen(t, j, clk, worklease.WithLeaseTTL(ttl))
		clk.Advance(ttl - time.Nanosecond)
		exp, err := m.Reap()
		require.NoError(t, err)
		require.Empty(t, exp)
		clk.Advance(time.Nanosecond)
		exp, err = m.Reap()
		require.NoError(t, err)
		require.Len(t, exp, 1, "a dead holder's restored lease is reaped")
		require.Equal(t, res.Token, exp[0].Token)
	})
	t.Run("Succeed", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk)
		clk.Set(opened)
		m := reopen(t, j, clk, worklease.WithLeaseTTL(ttl))
		clk.Advance(ttl)
		_, err := m.Succeed("a", res.Token)
		require.ErrorIs(t, err, worklease.ErrLeaseExpired)
	})
	t.Run("Fail", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(epoch)
		j, res := grantAndClose(t, clk)
		clk.Set(opened)
		m := reopen(t, j, clk, worklease.WithLeaseTTL(ttl))
		clk.Advance(ttl / 2)
		fres, err := m.Fail("a", res.Token, errors.New("boom"))
		require.NoError(t, err)
		require.Equal(t, worklease.RetryScheduled, fres.Status)
		require.True(t, leaseOf(t, m).ExpiresAt.Equal(clk.Now().Add(ttl)), "a retry gets a full TTL")
	})
}
