package wal_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/wal"
)

// A Manager on a wal.Log: what it acknowledged is still there after a
// restart, and a lease in flight can still be finished by its holder.
func Example() {
	dir, err := os.MkdirTemp("", "worklease-journal")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	j, err := wal.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	m, err := worklease.New(worklease.WithJournal(j))
	if err != nil {
		log.Fatal(err)
	}
	first, _ := m.TryAcquire("tenant-7", 1)
	_, _ = m.Succeed("tenant-7", first.Token) // returns once fsynced
	second, _ := m.TryAcquire("tenant-7", 2)
	_, _ = m.TryAcquire("tenant-7", 3)
	if err := m.Close(); err != nil { // closes j too
		log.Fatal(err)
	}

	// The process restarts: reopen the directory; New replays it.
	j, err = wal.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	m, err = worklease.New(worklease.WithJournal(j))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	done, _ := m.TryAcquire("tenant-7", 1)
	info, _ := m.Inspect("tenant-7")
	fmt.Println(done.Status, info.Lease.Offset, info.Backlog)
	res, err := m.Succeed("tenant-7", second.Token) // the token from before the restart
	fmt.Println(res.Status, res.Next, err)
	// Output:
	// AlreadyProcessed 2 [3]
	// NextHint 3 <nil>
}

func openManager(t *testing.T, dir string, opts ...wal.Option) *worklease.Manager {
	t.Helper()
	j, err := wal.Open(dir, opts...)
	require.NoError(t, err)
	m, err := worklease.New(worklease.WithJournal(j), worklease.WithMaxRetries(1))
	if err != nil {
		_ = j.Close()
	}
	require.NoError(t, err)
	return m
}

func TestJournalRestart(t *testing.T) {
	t.Parallel()
	for _, mode := range []wal.SyncMode{wal.SyncAlways, wal.SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			m := openManager(t, dir, wal.WithSyncMode(mode))
			for d := range 5 {
				domain := fmt.Sprint("d", d)
				for off := range int64(20) {
					res, err := m.TryAcquire(domain, off)
					require.NoError(t, err)
					if off%5 == 4 {
						for range 2 {
							_, err = m.Fail(domain, res.Token, errors.New("boom"))
							require.NoError(t, err)
						}
					} else {
						_, err = m.Succeed(domain, res.Token)
						require.NoError(t, err)
					}
				}
				_, err := m.TryAcquire(domain, 100)
				require.NoError(t, err)
				_, err = m.TryAcquire(domain, 101)
				require.NoError(t, err)
			}
			before := dump(t, m)
			require.NoError(t, m.Close())

			m = openManager(t, dir, wal.WithSyncMode(mode))
			defer func() { require.NoError(t, m.Close()) }()
			require.Equal(t, before, dump(t, m))
			letters, err := m.DeadLetters("d0")
			require.NoError(t, err)
			require.Len(t, letters, 4)
			require.EqualError(t, letters[0].Cause, "boom")
		})
	}
}

// TestJournalRestartAfterSucceedNext drives domains with SucceedNext and
// FailNext, whose records are those of a success or a give-up followed by a
// grant, and restarts: the state is the same, and the lease the last call
// granted can be finished by its holder.
func TestJournalRestartAfterSucceedNext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := openManager(t, dir) // WithMaxRetries(1)
	held := map[string]worklease.Token{}
	for d := range 3 {
		domain := fmt.Sprint("d", d)
		res, err := m.TryAcquire(domain, 0)
		require.NoError(t, err)
		for off := range int64(12) {
			_, err := m.TryAcquire(domain, off+1)
			require.NoError(t, err)
		}
		tok := res.Token
		for off := range int64(10) {
			var next worklease.LeaseInfo
			if off%4 == 3 {
				f, err := m.FailNext(domain, tok, errors.New("boom"))
				require.NoError(t, err)
				require.Equal(t, worklease.RetryScheduled, f.Status)
				f, err = m.FailNext(domain, tok, errors.New("boom"))
				require.NoError(t, err)
				require.Equal(t, worklease.GiveUpNextAcquired, f.Status)
				next = f.Lease
			} else {
				s, err := m.SucceedNext(domain, tok)
				require.NoError(t, err)
				require.Equal(t, worklease.NextAcquired, s.Status)
				next = s.Lease
			}
			require.Equal(t, off+1, next.Offset)
			tok = next.Token
		}
		held[domain] = tok
	}
	before := dump(t, m)
	require.NoError(t, m.Close())

	m = openManager(t, dir)
	defer func() { require.NoError(t, m.Close()) }()
	require.Equal(t, before, dump(t, m))
	for domain, tok := range held {
		s, err := m.SucceedNext(domain, tok)
		require.NoError(t, err)
		require.Equal(t, worklease.NextAcquired, s.Status)
		require.Equal(t, int64(11), s.Lease.Offset)
		info, err := m.Inspect(domain)
		require.NoError(t, err)
		require.Equal(t, int64(9), info.Processed)
		require.Equal(t, int64(2), info.Failed)
		require.Equal(t, []int64{12}, info.Backlog)
	}
}

func TestJournalSnapshotThenRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := openManager(t, dir, wal.WithSnapshotEvery(2<<10), wal.WithSegmentSize(wal.MinSegmentSize))
	for off := range int64(2000) {
		d := fmt.Sprint("d", off%10)
		res, err := m.TryAcquire(d, off)
		require.NoError(t, err)
		_, err = m.Succeed(d, res.Token)
		require.NoError(t, err)
	}
	_, err := m.TryAcquire("held", 1)
	require.NoError(t, err)
	require.NoError(t, m.Snapshot())
	before := dump(t, m)
	require.NoError(t, m.Close())

	j, err := wal.Open(dir)
	require.NoError(t, err)
	st := j.Stats()
	require.Positive(t, st.SnapshotSeq, "a snapshot was written")
	require.Less(t, st.RecordsSinceSnapshot, uint64(100), "it covers nearly everything")
	m, err = worklease.New(worklease.WithJournal(j), worklease.WithMaxRetries(1))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	require.Equal(t, before, dump(t, m))
}

func TestJournalSecondOpenIsLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := openManager(t, dir)
	defer func() { require.NoError(t, m.Close()) }()
	_, err := wal.Open(dir)
	require.ErrorIs(t, err, wal.ErrLocked)
}

// A Log serves one Manager: a second New on it is refused, with an error
// that both packages' sentinels match, changes nothing, and leaves the Log
// open for the first Manager, whose calls go on being journaled.
func TestJournalSecondManagerIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := wal.Open(dir)
	require.NoError(t, err)
	m, err := worklease.New(worklease.WithJournal(l))
	require.NoError(t, err)
	res, err := m.TryAcquire("a", 1)
	require.NoError(t, err)

	second, err := worklease.New(worklease.WithJournal(l))
	require.ErrorIs(t, err, wal.ErrInUse)
	require.ErrorIs(t, err, worklease.ErrJournalInUse)
	require.Nil(t, second)
	last := l.Stats().LastSeq
	_, err = m.Succeed("a", res.Token)
	require.NoError(t, err, "the first Manager's Log is still open")
	require.Equal(t, last+1, l.Stats().LastSeq)
	require.NoError(t, m.Close())

	m = openManager(t, dir)
	defer func() { require.NoError(t, m.Close()) }()
	again, err := m.TryAcquire("a", 1)
	require.NoError(t, err)
	require.Equal(t, worklease.AlreadyProcessed, again.Status)
}

// dump is what a Manager holds for the domains these tests use.
func dump(t *testing.T, m *worklease.Manager) map[string]any {
	t.Helper()
	out := map[string]any{}
	leases, err := m.Leases()
	require.NoError(t, err)
	for i := range leases {
		leases[i] = utc(leases[i])
	}
	out["leases"] = leases
	letters, err := m.DeadLetters("")
	require.NoError(t, err)
	var lines []string
	for _, dl := range letters {
		lines = append(lines, fmt.Sprint(dl.Domain, dl.Offset, dl.Attempts, dl.At.UTC(), dl.Cause))
	}
	out["dead"] = lines
	for d := range 10 {
		info, err := m.Inspect(fmt.Sprint("d", d))
		require.NoError(t, err)
		info.Lease = utc(info.Lease)
		out[fmt.Sprint("d", d)] = info
	}
	return out
}

// utc drops the location and monotonic reading of l's times: a journal
// keeps instants, and gives them back in UTC.
func utc(l worklease.LeaseInfo) worklease.LeaseInfo {
	if !l.AcquiredAt.IsZero() {
		l.AcquiredAt = l.AcquiredAt.UTC().Round(0)
	}
	if !l.ExpiresAt.IsZero() {
		l.ExpiresAt = l.ExpiresAt.UTC().Round(0)
	}
	return l
}

// A Manager's snapshot reflects each domain as the snapshot reaches it, so
// it may include records appended after the sequence number it covers.
// SnapshotState must make those durable before the snapshot takes effect,
// or a crash could leave a snapshot describing records the log lost.
func TestSnapshotStateMakesLaterRecordsDurable(t *testing.T) {
	t.Parallel()
	for _, mode := range []wal.SyncMode{wal.SyncAlways, wal.SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			l, err := wal.Open(t.TempDir(), wal.WithSyncMode(mode))
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Close()) }()
			_, err = l.AppendRecord(worklease.Record{Kind: worklease.EventPaused, Domain: "a", Offset: -1})
			require.NoError(t, err)
			var during uint64
			require.NoError(t, l.SnapshotState(func(w io.Writer) error {
				during, err = l.AppendRecord(worklease.Record{Kind: worklease.EventResumed, Domain: "a", Offset: -1})
				if err != nil {
					return err
				}
				_, err := w.Write([]byte("state"))
				return err
			}))
			require.GreaterOrEqual(t, l.Stats().Synced, during, "the record appended during the snapshot is fsynced")
		})
	}
}

// A lease's expiry belongs to the lease, across a reopen of the directory
// with other options: one granted under WithLeaseTTL keeps its expiry in a
// Manager without the option, which reaps it once due; one granted without
// an expiry gets one, a TTL after the Manager with the option is built, that
// every later replay keeps.
func TestLeaseExpiryAcrossReopen(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	open := func(opts ...worklease.Option) *worklease.Manager {
		t.Helper()
		l, err := wal.Open(dir)
		require.NoError(t, err)
		m, err := worklease.New(append([]worklease.Option{worklease.WithJournal(l), worklease.WithClock(clk)}, opts...)...)
		require.NoError(t, err)
		return m
	}
	expiry := func(m *worklease.Manager) time.Time {
		t.Helper()
		leases, err := m.Leases()
		require.NoError(t, err)
		require.Len(t, leases, 1)
		return leases[0].ExpiresAt
	}

	m := open(worklease.WithLeaseTTL(ttl))
	_, err := m.TryAcquire("a", 1)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	m = open()
	require.True(t, expiry(m).Equal(t0.Add(ttl)))
	clk.Advance(ttl)
	exp, err := m.Reap()
	require.NoError(t, err)
	require.Len(t, exp, 1)
	res, err := m.TryAcquire("a", 1) // granted again, never to expire
	require.NoError(t, err)
	require.Zero(t, res.ExpiresAt)
	require.NoError(t, m.Close())

	m = open(worklease.WithLeaseTTL(ttl))
	want := clk.Now().Add(ttl)
	require.True(t, expiry(m).Equal(want))
	require.NoError(t, m.Close())
	clk.Advance(ttl / 2)
	m = open()
	require.True(t, expiry(m).Equal(want), "a later replay keeps the expiry")
	clk.Advance(ttl / 2)
	exp, err = m.Reap()
	require.NoError(t, err)
	require.Len(t, exp, 1)
	require.Equal(t, res.Token, exp[0].Token)
	require.NoError(t, m.Close())
}
