package worklease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
)

// The contract's scenarios and error paths are the conformance suite's
// (leasetest, run by conformance_test.go); this file keeps the tests of
// what only the Manager offers, and the helpers the other files share.

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

// A domainSnapshot is what Inspect reports of a domain, and its terminal
// offsets as the Manager stores them.
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
