package worklease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
)

// Every call of the Manager's Backend returns the context's error when it is
// already done, and then changes nothing: no state, no count.
func TestManagerBackendDoneContext(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	m, err := worklease.New(worklease.WithLeaseTTL(time.Minute), worklease.WithClock(clk))
	require.NoError(t, err)
	b := m.Backend()
	t.Cleanup(func() { _ = b.Close() })

	// A domain with a lease, a backlog and a dead letter, due to expire.
	ctx := context.Background()
	res, err := b.TryAcquire(ctx, "d", 0)
	require.NoError(t, err)
	_, err = b.TryAcquire(ctx, "d", 1)
	require.NoError(t, err)
	_, err = b.Kill(ctx, "d", 7, "bad")
	require.NoError(t, err)
	clk.Advance(2 * time.Minute)
	before, stats := inspectRaw(t, m, "d"), m.Stats()

	done, cancel := context.WithCancel(ctx)
	cancel()
	calls := map[string]func() error{
		"TryAcquire":  func() error { _, err := b.TryAcquire(done, "d", 2); return err },
		"Succeed":     func() error { _, err := b.Succeed(done, "d", res.Token); return err },
		"SucceedNext": func() error { _, err := b.SucceedNext(done, "d", res.Token); return err },
		"Fail":        func() error { _, err := b.Fail(done, "d", res.Token, errors.New("x")); return err },
		"FailNext":    func() error { _, err := b.FailNext(done, "d", res.Token, errors.New("x")); return err },
		"Extend":      func() error { _, err := b.Extend(done, "d", res.Token, time.Minute); return err },
		"Inspect":     func() error { _, err := b.Inspect(done, "d"); return err },
		"Leases":      func() error { _, err := b.Leases(done); return err },
		"Domains":     func() error { _, err := b.Domains(done); return err },
		"DeadLetters": func() error { _, err := b.DeadLetters(done, "d"); return err },
		"Kill":        func() error { _, err := b.Kill(done, "d", 1, "r"); return err },
		"Redrive":     func() error { _, err := b.Redrive(done, "d", 7); return err },
		"ForceRelease": func() error {
			_, err := b.ForceRelease(done, "d")
			return err
		},
		"Pause":  func() error { return b.Pause(done, "d") },
		"Resume": func() error { _, err := b.Resume(done, "d"); return err },
		"Reap":   func() error { _, err := b.Reap(done); return err },
		"Forget": func() error { return b.Forget(done, "d") },
	}
	for name, call := range calls {
		require.ErrorIs(t, call(), context.Canceled, name)
		require.Equal(t, before, inspectRaw(t, m, "d"), "%s changed the domain", name)
		require.Equal(t, stats, m.Stats(), "%s counted a transition", name)
	}

	// With a live context the same calls go through: the lease expired.
	_, err = b.Succeed(ctx, "d", res.Token)
	require.ErrorIs(t, err, worklease.ErrLeaseExpired)
}

// inspectRaw returns what DomainInfo and DeadLetters report of domain
// without touching it: Inspect itself would expire a due lease.
func inspectRaw(t *testing.T, m *worklease.Manager, domain string) any {
	t.Helper()
	leases, err := m.Leases()
	require.NoError(t, err)
	dead, err := m.DeadLetters(domain)
	require.NoError(t, err)
	return []any{leases, dead}
}

// The Backend is the Manager: what one call does through it, the Manager
// sees, and closing it closes the Manager.
func TestManagerBackendIsTheManager(t *testing.T) {
	m, err := worklease.New()
	require.NoError(t, err)
	b := m.Backend()
	ctx := context.Background()

	res, err := b.TryAcquire(ctx, "d", 5)
	require.NoError(t, err)
	info, err := m.Inspect("d")
	require.NoError(t, err)
	require.Equal(t, res.Token, info.Lease.Token)
	_, err = m.Succeed("d", res.Token)
	require.NoError(t, err)
	again, err := b.TryAcquire(ctx, "d", 5)
	require.NoError(t, err)
	require.Equal(t, worklease.AlreadyProcessed, again.Status)

	require.NoError(t, b.Close())
	_, err = m.TryAcquire("d", 6)
	require.ErrorIs(t, err, worklease.ErrClosed)
	require.ErrorIs(t, b.Close(), worklease.ErrClosed)
}

// NewConfig applies the options in order to the defaults, and refuses what
// New refuses with the same error.
func TestNewConfig(t *testing.T) {
	cfg, err := worklease.NewConfig()
	require.NoError(t, err)
	require.Equal(t, worklease.Config{
		MaxRetries: worklease.DefaultMaxRetries, Ordering: worklease.FIFO, Shards: worklease.DefaultShards,
		MaxPayload: worklease.DefaultMaxPayload, KeyWindow: worklease.DefaultKeyWindow,
	}, cfg)

	clk := clock.NewFake(time.Unix(0, 0))
	obs := worklease.ObserverFunc(func(worklease.Event) {})
	cfg, err = worklease.NewConfig(
		worklease.WithMaxRetries(5), worklease.WithMaxRetries(1), nil,
		worklease.WithLeaseTTL(time.Second), worklease.WithOrdering(worklease.LIFO), worklease.WithBestEffortOrdering(),
		worklease.WithParkOnDeadLetter(), worklease.WithMonotonicOffsets(), worklease.WithClock(clk),
		worklease.WithObserver(obs), worklease.WithShards(3),
	)
	require.NoError(t, err)
	require.Equal(t, 1, cfg.MaxRetries, "the last option wins")
	require.Equal(t, time.Second, cfg.LeaseTTL)
	require.Equal(t, worklease.LIFO, cfg.Ordering)
	require.True(t, cfg.BestEffortOrdering && cfg.ParkOnDeadLetter && cfg.MonotonicOffsets)
	require.Equal(t, worklease.Clock(clk), cfg.Clock)
	require.NotNil(t, cfg.Observer)
	require.Equal(t, 3, cfg.Shards, "NewConfig reports the setting; the Manager rounds it up")

	for _, bad := range []worklease.Option{
		worklease.WithMaxRetries(-1), worklease.WithLeaseTTL(-time.Second),
		worklease.WithOrdering(0), worklease.WithShards(0),
	} {
		_, cfgErr := worklease.NewConfig(bad)
		require.ErrorIs(t, cfgErr, worklease.ErrInvalidConfig)
		_, newErr := worklease.New(bad)
		require.EqualError(t, newErr, cfgErr.Error())
	}
}
