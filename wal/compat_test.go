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

// copyJournal copies the journal testdata/name into a new directory.
func copyJournal(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	for _, file := range []string{"0000000000000001.wal", "snapshot"} {
		b, err := os.ReadFile(filepath.Join("testdata", name, file))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), b, 0o644))
	}
	return dir
}

// The journals testdata/v1snapshot and testdata/v2snapshot were written by
// the same calls, with a clock fixed at snapTime, WithMonotonicOffsets and
// WithMaxRetries(2): on "keyed", offsets 3 and 8 processed, 5 killed; on
// "released", offset 1 acquired, failed once, then force-released, so
// queued after 2 attempts, 1 of them failed; on "inflight", the same, then
// offset 1 granted again, its third attempt, in flight; a snapshot; then
// offset 12 of "keyed" processed. v1snapshot was written before journals
// recorded the option and the attempts made beside the failed ones (a
// version 1 snapshot, no RecordSettings record), v2snapshot by the current
// code.
var snapTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// checkSnapJournal checks what m holds of the journals above, and that the
// queued offset dead-letters with attempts attempts when killed, and the
// offset in flight with attempts+1.
func checkSnapJournal(t *testing.T, m *worklease.Manager, attempts int) {
	t.Helper()
	info, err := m.Inspect("keyed")
	require.NoError(t, err)
	assert.Equal(t, worklease.DomainInfo{Processed: 12, Failed: 1}, info, "[0, 12] but the failed 5")
	res, err := m.TryAcquire("keyed", 7)
	require.NoError(t, err)
	assert.Equal(t, worklease.AlreadyProcessed, res.Status)
	info, err = m.Inspect("released")
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, info.Backlog)
	_, err = m.Kill("released", 1, "poison")
	require.NoError(t, err)
	dead, err := m.DeadLetters("released")
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, attempts, dead[0].Attempts)

	info, err = m.Inspect("inflight")
	require.NoError(t, err)
	require.True(t, info.Leased)
	assert.Equal(t, 1, info.Lease.RetryCount)
	_, err = m.Kill("inflight", 1, "poison")
	require.NoError(t, err)
	dead, err = m.DeadLetters("inflight")
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, attempts+1, dead[0].Attempts)
}

// A journal written before journals recorded WithMonotonicOffsets replays
// as it always did: under the option of the Manager opening it, so only
// with it. Its version 1 snapshot's requeued offset carries its failed
// attempts as its attempts made. Once a snapshot of the current version
// replaces it, the journal says how it reads, and opens either way.
func TestReplaySnapshotVersion1(t *testing.T) {
	t.Parallel()
	dir := copyJournal(t, "v1snapshot")
	open := func(opts ...worklease.Option) (*worklease.Manager, error) {
		l, err := wal.Open(dir)
		require.NoError(t, err)
		return worklease.New(append(opts, worklease.WithJournal(l), worklease.WithClock(fixedClock(snapTime)))...)
	}
	_, err := open()
	require.ErrorIs(t, err, worklease.ErrReplay)
	assert.ErrorContains(t, err, "was the journal written WithMonotonicOffsets?")

	m, err := open(worklease.WithMonotonicOffsets())
	require.NoError(t, err)
	checkSnapJournal(t, m, 1) // what version 1 kept: the failed attempts
	require.NoError(t, m.Snapshot())
	require.NoError(t, m.Close())

	m, err = open() // now without the option
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	info, err := m.Inspect("keyed")
	require.NoError(t, err)
	assert.Equal(t, worklease.DomainInfo{Processed: 12, Failed: 1}, info)
	res, err := m.TryAcquire("keyed", 7)
	require.NoError(t, err)
	assert.Equal(t, worklease.AlreadyProcessed, res.Status)
}

// A journal written by the current code says it was written
// WithMonotonicOffsets, so it replays the same with the option or without,
// and its requeued offset keeps both its attempts.
func TestReplaySnapshotVersion2(t *testing.T) {
	t.Parallel()
	for _, monotonic := range []bool{true, false} {
		dir := copyJournal(t, "v2snapshot")
		l, err := wal.Open(dir)
		require.NoError(t, err)
		opts := []worklease.Option{worklease.WithJournal(l), worklease.WithClock(fixedClock(snapTime))}
		if monotonic {
			opts = append(opts, worklease.WithMonotonicOffsets())
		}
		m, err := worklease.New(opts...)
		require.NoError(t, err)
		checkSnapJournal(t, m, 2)
		require.NoError(t, m.Close())
	}
}
