package wal_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// TestReplayRecordVersion1 replays a journal written before records were
// encoded in version 2 of their binary form (testdata/v1journal), then goes
// on with it, so that the log holds both versions, and replays that too.
//
// The journal was written with a clock fixed at v1Time, WithLeaseTTL(time.Hour)
// and WithMaxRetries(1): offsets 1 to 3 of "orders" processed, 4 leased under
// v1Lease, 5 queued; offset 7 of "billing" failed twice with "boom", so
// dead-lettered after 2 attempts.
func TestReplayRecordVersion1(t *testing.T) {
	t.Parallel()
	const v1Lease = "4-1-7928c5c3a1d3c61a"
	v1Time := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	segment := "0000000000000001.wal"
	b, err := os.ReadFile(filepath.Join("testdata", "v1journal", segment))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, segment), b, 0o644))
	open := func() *worklease.Manager {
		l, err := wal.Open(dir)
		require.NoError(t, err)
		m, err := worklease.New(worklease.WithJournal(l), worklease.WithClock(fixedClock(v1Time)),
			worklease.WithLeaseTTL(time.Hour), worklease.WithMaxRetries(1))
		require.NoError(t, err)
		return m
	}
	check := func(m *worklease.Manager, processed int64, backlog []int64) {
		t.Helper()
		info, err := m.Inspect("orders")
		require.NoError(t, err)
		assert.Equal(t, processed, info.Processed)
		assert.Equal(t, backlog, info.Backlog)
		dead, err := m.DeadLetters("billing")
		require.NoError(t, err)
		require.Len(t, dead, 1)
		assert.Equal(t, int64(7), dead[0].Offset)
		assert.Equal(t, 2, dead[0].Attempts)
		assert.EqualError(t, dead[0].Cause, "boom")
		assert.Equal(t, v1Time, dead[0].At)
	}

	m := open()
	check(m, 3, []int64{5})
	info, err := m.Inspect("orders")
	require.NoError(t, err)
	require.True(t, info.Leased)
	assert.Equal(t, worklease.LeaseInfo{
		Domain: "orders", Offset: 4, Token: info.Lease.Token,
		AcquiredAt: v1Time, ExpiresAt: v1Time.Add(time.Hour),
	}, info.Lease)
	assert.Equal(t, v1Lease, info.Lease.Token.String())
	// The holder of the lease in flight finishes it, and offset 5 follows.
	res, err := m.Succeed("orders", info.Lease.Token)
	require.NoError(t, err)
	assert.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 5}, res)
	tok := mustAcquired(t, m, "orders", 5)
	require.NoError(t, m.Close())

	m = open()
	check(m, 4, nil)
	info, err = m.Inspect("orders")
	require.NoError(t, err)
	assert.Equal(t, tok, info.Lease.Token)
	_, err = m.Succeed("orders", tok)
	require.NoError(t, err)
	check(m, 5, nil)
	require.NoError(t, m.Close())
}
