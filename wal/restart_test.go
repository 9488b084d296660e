package wal_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// New refused for an invalid option leaves its journal as WithJournal says:
// untouched and open, free for a New with valid options.
func TestRestartNewWithInvalidConfigLeavesJournal(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir)
	require.NoError(t, err)
	_, err = worklease.New(worklease.WithJournal(l), worklease.WithMaxRetries(-1))
	require.ErrorIs(t, err, worklease.ErrInvalidConfig)
	m, err := worklease.New(worklease.WithJournal(l))
	require.NoError(t, err, "the journal is still open, and serves no Manager yet")
	require.NoError(t, m.Close())
}

// The largest records a Manager writes fit a log opened with the smallest
// record limit, in every sync mode, and replay the same: a domain of
// MaxDomainLen bytes with a Fail cause and a Kill reason longer than
// MaxCauseLen, made of multi-byte runes.
func TestRestartLargestRecordsFitMinMaxRecordSize(t *testing.T) {
	for _, mode := range []wal.SyncMode{wal.SyncAlways, wal.SyncNone} {
		dir := t.TempDir()
		open := func() *worklease.Manager {
			l, err := wal.Open(dir, wal.WithMaxRecordSize(wal.MinMaxRecordSize), wal.WithSyncMode(mode))
			require.NoError(t, err)
			m, err := worklease.New(worklease.WithJournal(l), worklease.WithMaxRetries(1))
			require.NoError(t, err)
			return m
		}
		m := open()
		domain := strings.Repeat("d", worklease.MaxDomainLen)
		cause := strings.Repeat("é", worklease.MaxCauseLen) // 2 bytes each
		r, err := m.TryAcquire(domain, 1)
		require.NoError(t, err)
		_, err = m.TryAcquire(domain, 2)
		require.NoError(t, err)
		_, err = m.Fail(domain, r.Token, errors.New(cause))
		require.NoError(t, err)
		_, err = m.FailNext(domain, r.Token, errors.New(cause))
		require.NoError(t, err)
		_, err = m.Kill(domain, 2, cause)
		require.NoError(t, err)
		before, err := m.DeadLetters(domain)
		require.NoError(t, err)
		require.Len(t, before, 2)
		require.NoError(t, m.Close())
		m = open()
		after, err := m.DeadLetters(domain)
		require.NoError(t, err)
		require.Len(t, after, 2)
		for i := range before {
			require.Equal(t, before[i].Cause.Error(), after[i].Cause.Error())
			require.Equal(t, before[i].Attempts, after[i].Attempts)
		}
		require.NoError(t, m.Close())
	}
}

// WithMonotonicOffsets says the switch of the option reaches the journal
// with the Manager's first record or snapshot. A Snapshot taken right after
// New on a journal whose last snapshot covers every record is a no-op, so
// the switch never reaches the journal: an offset the monotonic Manager
// answered AlreadyProcessed for is granted as new work after the next
// restart, although "every offset that counted as processed stays
// processed" when the option is switched off.
func TestRestartSnapshotRecordsSwitch(t *testing.T) {
	dir := t.TempDir()
	open := func(opts ...worklease.Option) *worklease.Manager {
		l, err := wal.Open(dir)
		require.NoError(t, err)
		m, err := worklease.New(append(opts, worklease.WithJournal(l))...)
		require.NoError(t, err)
		return m
	}
	m := open()
	r, err := m.TryAcquire("a", 5)
	require.NoError(t, err)
	_, err = m.Succeed("a", r.Token)
	require.NoError(t, err)
	require.NoError(t, m.Snapshot())
	require.NoError(t, m.Close())

	m = open(worklease.WithMonotonicOffsets())
	res, err := m.TryAcquire("a", 3)
	require.NoError(t, err)
	require.Equal(t, worklease.AlreadyProcessed, res.Status)
	require.NoError(t, m.Snapshot()) // the switch should reach the journal here
	require.NoError(t, m.Close())

	m = open()
	defer m.Close()
	res, err = m.TryAcquire("a", 3)
	require.NoError(t, err)
	require.Equal(t, worklease.AlreadyProcessed, res.Status, "offset 3 counted as processed before the restart")
}

// A journal written before domains were bounded holds a lease, granted
// without a TTL, on a domain longer than MaxDomainLen whose Acquired record
// fits the log's limit. The Journal doc says the Manager writes no record
// of such a domain again, and Reap leaves its lease alone; but New with
// WithLeaseTTL gives the restored lease an expiry and journals it as an
// Extended record, which is larger than the Acquired one and over the
// limit: New fails with ErrJournalFailed, and does so after every restart,
// so the journal can never be opened with a TTL again.
func TestRestartTimeRestoredLeaseOfUnboundedDomain(t *testing.T) {
	dir := t.TempDir()
	tok, err := worklease.NewToken(1, 1, 7)
	require.NoError(t, err)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := worklease.Record{Kind: worklease.EventAcquired, Offset: 1, Attempt: 1, Token: tok, At: at, AcquiredAt: at}
	// The longest domain whose Acquired record fits the limit.
	const limit = 1 << 20
	rec.Domain = strings.Repeat("x", limit-64)
	for {
		b, _ := rec.MarshalBinary()
		if len(b) == limit {
			break
		}
		rec.Domain = strings.Repeat("x", len(rec.Domain)+limit-len(b))
	}
	l, err := wal.Open(dir, wal.WithMaxRecordSize(limit))
	require.NoError(t, err)
	seq, err := l.AppendRecord(rec)
	require.NoError(t, err)
	require.NoError(t, l.Wait(seq))
	require.NoError(t, l.Close())

	// Without a TTL it opens (the lease is kept, as documented).
	l, err = wal.Open(dir, wal.WithMaxRecordSize(limit))
	require.NoError(t, err)
	m, err := worklease.New(worklease.WithJournal(l))
	require.NoError(t, err)
	require.NoError(t, m.Close())

	// With one, New must not write a record of that domain.
	l, err = wal.Open(dir, wal.WithMaxRecordSize(limit))
	require.NoError(t, err)
	m, err = worklease.New(worklease.WithJournal(l), worklease.WithLeaseTTL(time.Minute))
	require.NoError(t, err, "a lease on a domain no call accepts made New fail")
	require.NoError(t, m.Close())
}

// A second New on a Log that a failed New closed is told the Log is closed,
// not that another Manager uses it.
func TestRestartNewOnClosedLog(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	_, err = worklease.New(worklease.WithJournal(l))
	require.ErrorIs(t, err, wal.ErrClosed)
	require.NotErrorIs(t, err, worklease.ErrJournalInUse)
}
