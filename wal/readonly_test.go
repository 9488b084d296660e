package wal_test

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// dirBytes returns the content of every file in dir, by name.
func dirBytes(t testing.TB, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// openRO opens dir read-only and closes the log when the test ends.
func openRO(t testing.TB, dir string) *wal.Log {
	t.Helper()
	l, err := wal.Open(dir, wal.WithReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestReadOnlyTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	ps := payloads(5, "record %d")
	appendWait(t, l, ps...)
	require.NoError(t, l.Close())
	seg := filepath.Join(dir, "0000000000000001.wal")
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{40, 0, 0, 0, 1, 2, 3}) // half a record header
	require.NoError(t, err)
	require.NoError(t, f.Close())
	fi, err := os.Stat(seg)
	require.NoError(t, err)
	before := dirBytes(t, dir)

	ro, err := wal.Open(dir, wal.WithReadOnly())
	require.NoError(t, err)
	rc := ro.Recovery()
	assert.True(t, rc.ReadOnly)
	require.NotNil(t, rc.Torn)
	assert.Equal(t, "0000000000000001.wal", rc.Torn.File)
	assert.Equal(t, fi.Size()-7, rc.Torn.Offset)
	assert.Equal(t, int64(7), rc.Torn.Bytes)
	assert.ErrorIs(t, rc.Torn.Reason, wal.ErrUnexpectedEOF)
	assert.Equal(t, uint64(5), rc.LastSeq)
	assert.Equal(t, replayed{Records: records(1, 1, ps)}, replayAll(t, ro))
	assert.Equal(t, uint64(5), ro.Stats().LastSeq)
	assert.Equal(t, fi.Size()-7, ro.Stats().LogBytes, "only committed bytes count")
	require.NoError(t, ro.Close())
	assert.Equal(t, before, dirBytes(t, dir), "the torn tail is still there")

	// A writable Open cuts exactly what the read-only one reported.
	w := open(t, dir)
	assert.Equal(t, rc.Torn, w.Recovery().Torn)
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	ps := payloads(3, "p%d")
	appendWait(t, l, ps...)
	require.NoError(t, l.Close())
	before := dirBytes(t, dir)

	ro := openRO(t, dir)
	_, err := ro.Append(1, []byte("x"))
	assert.ErrorIs(t, err, wal.ErrReadOnly)
	_, err = ro.AppendRecord(worklease.Record{Kind: worklease.EventPaused, Domain: "d", Offset: -1})
	assert.ErrorIs(t, err, wal.ErrReadOnly)
	err = ro.WriteSnapshot(3, func(io.Writer) error {
		t.Error("WriteSnapshot called write on a read-only log")
		return nil
	})
	assert.ErrorIs(t, err, wal.ErrReadOnly)
	err = ro.SnapshotState(func(io.Writer) error {
		t.Error("SnapshotState called write on a read-only log")
		return nil
	})
	assert.ErrorIs(t, err, wal.ErrReadOnly)
	assert.False(t, ro.SnapshotDue())
	assert.NoError(t, ro.Wait(3), "recovered records are durable")
	assert.ErrorIs(t, ro.Wait(4), wal.ErrInvalidSeq)
	assert.Equal(t, uint64(3), ro.Durable())
	assert.Equal(t, replayed{Records: records(1, 1, ps)}, replayAll(t, ro), "replay still works")
	require.NoError(t, ro.Close())
	require.NoError(t, ro.Close())
	assert.Equal(t, before, dirBytes(t, dir))
}

func TestReadOnlySnapshotAndRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir, wal.WithSegmentSize(wal.MinSegmentSize))
	ps := payloads(60, "record %03d, padded to take some room in a segment")
	appendWait(t, l, ps[:40]...)
	require.NoError(t, l.WriteSnapshot(40, func(w io.Writer) error {
		_, err := io.WriteString(w, "forty")
		return err
	}))
	appendWait(t, l, ps[40:]...)
	require.NoError(t, l.Close())
	before := dirBytes(t, dir)

	ro := openRO(t, dir)
	rc := ro.Recovery()
	assert.Equal(t, uint64(40), rc.SnapshotSeq)
	assert.Equal(t, uint64(60), rc.LastSeq)
	assert.Nil(t, rc.Torn)
	// The segment that was active when the snapshot was written holds only
	// records it covers: a writable Open would remove it; this one keeps it.
	for _, name := range rc.Removed {
		assert.Contains(t, before, name)
	}
	assert.Equal(t, replayed{SnapSeq: 40, SnapData: "forty", Records: records(1, 41, ps[40:])}, replayAll(t, ro))
	assert.Equal(t, uint64(20), ro.Stats().RecordsSinceSnapshot)
	require.NoError(t, ro.Close())
	assert.Equal(t, before, dirBytes(t, dir))
}

func TestReadOnlyMissingLog(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := wal.Open(missing, wal.WithReadOnly())
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NoDirExists(t, missing, "a read-only Open creates nothing")

	empty := t.TempDir()
	_, err = wal.Open(empty, wal.WithReadOnly())
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, "no log in")
	assert.Empty(t, dirBytes(t, empty), "not even a LOCK file")
}

func TestReadOnlyLocking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := open(t, dir)
	appendWait(t, w, "one")

	_, err := wal.Open(dir, wal.WithReadOnly())
	assert.ErrorIs(t, err, wal.ErrLocked, "a writer keeps readers out")
	require.NoError(t, w.Close())

	r1 := openRO(t, dir)
	r2 := openRO(t, dir) // readers share
	_, err = wal.Open(dir)
	assert.ErrorIs(t, err, wal.ErrLocked, "a reader keeps writers out")
	require.NoError(t, r1.Close())
	_, err = wal.Open(dir)
	assert.ErrorIs(t, err, wal.ErrLocked, "so does the last one")
	require.NoError(t, r2.Close())
	w = open(t, dir)
	assert.Equal(t, uint64(1), w.Recovery().LastSeq)
}

func TestReadOnlyWithoutLockFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	appendWait(t, l, "one", "two")
	require.NoError(t, l.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "LOCK"))) // as in a copy of the files
	before := dirBytes(t, dir)

	ro := openRO(t, dir)
	assert.Equal(t, uint64(2), ro.Recovery().LastSeq)
	require.NoError(t, ro.Close())
	assert.Equal(t, before, dirBytes(t, dir), "no LOCK file created")
}

// TestReadOnlyManager builds a Manager on a read-only Log: it sees the
// journaled state, and the first call that would change anything fails it
// closed with ErrReadOnly, without touching the files.
func TestReadOnlyManager(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m, err := worklease.New(worklease.WithJournal(open(t, dir)), worklease.WithClock(fixedClock(start)),
		worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(0))
	require.NoError(t, err)
	res, err := m.TryAcquire("a", 1)
	require.NoError(t, err)
	_, err = m.TryAcquire("a", 2)
	require.NoError(t, err)
	_, err = m.TryAcquire("b", 7)
	require.NoError(t, err)
	_, err = m.Fail("b", mustAcquired(t, m, "b", 7), io.ErrUnexpectedEOF)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	before := dirBytes(t, dir)

	// A frozen clock at the zero time: the lease, which expires at
	// start+1m, never does, so looking writes nothing.
	ro := openRO(t, dir)
	m, err = worklease.New(worklease.WithJournal(ro), worklease.WithClock(fixedClock(time.Time{})))
	require.NoError(t, err)
	info, err := m.Inspect("a")
	require.NoError(t, err)
	assert.True(t, info.Leased)
	assert.Equal(t, res.Token, info.Lease.Token)
	assert.Equal(t, []int64{2}, info.Backlog)
	leases, err := m.Leases()
	require.NoError(t, err)
	assert.Len(t, leases, 1)
	dead, err := m.DeadLetters("")
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, io.ErrUnexpectedEOF.Error(), dead[0].Cause.Error())

	_, err = m.Succeed("a", res.Token)
	assert.ErrorIs(t, err, worklease.ErrJournalFailed)
	assert.ErrorIs(t, err, wal.ErrReadOnly)
	require.NoError(t, m.Close())
	assert.Equal(t, before, dirBytes(t, dir))
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// mustAcquired returns the token of the lease domain holds on offset.
func mustAcquired(t testing.TB, m *worklease.Manager, domain string, offset int64) worklease.Token {
	t.Helper()
	res, err := m.TryAcquire(domain, offset)
	require.NoError(t, err)
	require.Contains(t, []worklease.AcquireStatus{worklease.Acquired, worklease.AlreadyAcquired}, res.Status)
	return res.Token
}
