package wal_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// A payload stays readable while its offset is unfinished, however many
// snapshots cover its record: the segment that holds it is kept, through
// restarts too, while the segments around it go; once the offset
// succeeds, the next snapshot lets its segment go as well.
func TestPayloadKeptAcrossSnapshots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() (*worklease.Manager, *wal.Log) {
		l, err := wal.Open(dir, wal.WithSegmentSize(wal.MinSegmentSize), wal.WithSnapshotEvery(2<<10))
		require.NoError(t, err)
		m, err := worklease.New(worklease.WithJournal(l))
		require.NoError(t, err)
		return m, l
	}
	first := filepath.Join(dir, "0000000000000001.wal")
	churn := func(m *worklease.Manager) { // records enough for segments and snapshots to come and go
		for range 300 {
			res, err := m.Append("busy", []byte("x"), worklease.AppendOptions{})
			require.NoError(t, err)
			tok, err := m.TryAcquire("busy", res.Offset)
			require.NoError(t, err)
			_, err = m.Succeed("busy", tok.Token)
			require.NoError(t, err)
		}
	}
	m, l := open()
	kept := bytes.Repeat([]byte("kept "), 100)
	_, err := m.Enqueue("a", 1, kept)
	require.NoError(t, err)
	churn(m)
	st := l.Stats()
	require.Positive(t, st.SnapshotSeq, "snapshots were written")
	require.FileExists(t, first, "the segment of a/1's payload is kept")
	require.FileExists(t, filepath.Join(dir, "kept"))
	require.Less(t, st.Segments, 10, "the other segments the snapshots cover are removed")
	got, err := m.Payload("a", 1)
	require.NoError(t, err)
	require.Equal(t, kept, got)

	require.NoError(t, m.Close())
	m, _ = open()
	churn(m)
	cs, err := m.Claim(5)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, kept, cs[0].Payload, "a/1's payload after a restart")
	_, err = m.Succeed("a", cs[0].Token)
	require.NoError(t, err)
	got, err = m.Payload("a", 1)
	require.NoError(t, err)
	require.Nil(t, got, "a processed offset's payload is gone")
	churn(m)
	_, err = os.Stat(first)
	require.ErrorIs(t, err, os.ErrNotExist, "no snapshot refers to the first segment any more")
	require.NoError(t, m.Close())
}

// ReadPayload reads only what a Manager's record with a payload holds.
func TestReadPayloadRefuses(t *testing.T) {
	t.Parallel()
	l, err := wal.Open(t.TempDir())
	require.NoError(t, err)
	defer l.Close()
	rec := worklease.Record{Kind: worklease.EventEnqueued, Domain: "a", Offset: 1, Payload: []byte("p")}
	seq, err := l.AppendRecord(rec)
	require.NoError(t, err)
	got, err := l.ReadPayload(seq)
	require.NoError(t, err)
	require.Equal(t, []byte("p"), got, "read back before a Wait: ReadPayload writes it first")
	plain, err := l.AppendRecord(worklease.Record{Kind: worklease.EventEnqueued, Domain: "a", Offset: 2})
	require.NoError(t, err)
	for _, s := range []uint64{0, plain, plain + 1} {
		_, err := l.ReadPayload(s)
		require.ErrorIs(t, err, wal.ErrInvalidSeq, "record %d", s)
	}
}

// A snapshot taken while a payload's segment is still being written keeps
// that segment too: once the next segment begins right after the
// snapshot, Open counts it as covered, and must not remove it.
func TestPayloadKeptInSegmentBeingWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() *worklease.Manager {
		l, err := wal.Open(dir, wal.WithSegmentSize(wal.MinSegmentSize))
		require.NoError(t, err)
		m, err := worklease.New(worklease.WithJournal(l))
		require.NoError(t, err)
		return m
	}
	m := open()
	_, err := m.Enqueue("a", 1, []byte("small"))
	require.NoError(t, err)
	require.NoError(t, m.Snapshot()) // covers a/1, whose segment is the last
	// A record too large for the segment's room starts the next one, right
	// after the snapshot.
	_, err = m.Enqueue("b", 1, bytes.Repeat([]byte("x"), wal.MinSegmentSize))
	require.NoError(t, err)
	require.NoError(t, m.Close())

	m = open()
	defer m.Close()
	got, err := m.Payload("a", 1)
	require.NoError(t, err)
	require.Equal(t, []byte("small"), got)
}
