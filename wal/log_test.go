package wal_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease/wal"
)

// rec is one replayed record.
type rec struct {
	Seq     uint64
	Kind    uint8
	Payload string
}

// replayed is everything Replay hands back.
type replayed struct {
	SnapSeq  uint64
	SnapData string
	Records  []rec
}

func replayAll(t testing.TB, l *wal.Log) replayed {
	t.Helper()
	var r replayed
	err := l.Replay(func(seq uint64, data []byte) error {
		r.SnapSeq, r.SnapData = seq, string(data)
		return nil
	}, func(seq uint64, kind uint8, payload []byte) error {
		r.Records = append(r.Records, rec{seq, kind, string(payload)})
		return nil
	})
	require.NoError(t, err)
	return r
}

// open opens dir and closes the log when the test ends.
func open(t testing.TB, dir string, opts ...wal.Option) *wal.Log {
	t.Helper()
	l, err := wal.Open(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// appendWait appends and waits for each payload, with kind 1.
func appendWait(t testing.TB, l *wal.Log, payloads ...string) []uint64 {
	t.Helper()
	seqs := make([]uint64, len(payloads))
	for i, p := range payloads {
		seq, err := l.Append(1, []byte(p))
		require.NoError(t, err)
		require.NoError(t, l.Wait(seq))
		seqs[i] = seq
	}
	return seqs
}

func payloads(n int, format string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i+1)
	}
	return out
}

func records(kind uint8, from uint64, ps []string) []rec {
	out := make([]rec, len(ps))
	for i, p := range ps {
		out[i] = rec{from + uint64(i), kind, p}
	}
	return out
}

func TestOpenAppendReplay(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "var", "journal") // Open creates both
	l, err := wal.Open(dir)
	require.NoError(t, err)
	assert.True(t, l.Recovery().Created)
	assert.Empty(t, replayAll(t, l).Records)

	want := []rec{{1, 1, "created"}, {2, 7, ""}, {3, wal.MaxKind, "done"}}
	for _, r := range want {
		seq, err := l.Append(r.Kind, []byte(r.Payload))
		require.NoError(t, err)
		require.Equal(t, r.Seq, seq)
	}
	require.NoError(t, l.Wait(3))
	assert.Equal(t, uint64(3), l.Durable())
	require.NoError(t, l.Close())

	l = open(t, dir)
	rc := l.Recovery()
	assert.False(t, rc.Created)
	assert.Nil(t, rc.Torn)
	assert.Equal(t, uint64(3), rc.LastSeq)
	assert.Equal(t, replayed{Records: want}, replayAll(t, l))
	seq, err := l.Append(1, []byte("next"))
	require.NoError(t, err)
	assert.Equal(t, uint64(4), seq)
}

func TestAppendRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		kind    uint8
		payload []byte
		want    error
	}{
		{"kind 0", 0, nil, wal.ErrInvalidKind},
		{"kind above MaxKind", wal.MaxKind + 1, nil, wal.ErrInvalidKind},
		{"commit marker kind", 255, nil, wal.ErrInvalidKind},
		{"payload too large", 1, make([]byte, wal.MinMaxRecordSize+1), wal.ErrRecordTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := open(t, t.TempDir(), wal.WithMaxRecordSize(wal.MinMaxRecordSize))
			_, err := l.Append(tt.kind, tt.payload)
			require.ErrorIs(t, err, tt.want)
			assert.Equal(t, uint64(0), l.Stats().LastSeq, "a rejected record changes nothing")
			seq, err := l.Append(1, make([]byte, wal.MinMaxRecordSize))
			require.NoError(t, err)
			assert.Equal(t, uint64(1), seq)
		})
	}
}

func TestOpenInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  wal.Option
	}{
		{"zero sync mode", wal.WithSyncMode(wal.SyncMode{})},
		{"zero interval", wal.WithSyncMode(wal.SyncInterval(0))},
		{"negative interval", wal.WithSyncMode(wal.SyncInterval(-time.Second))},
		{"small segment", wal.WithSegmentSize(wal.MinSegmentSize - 1)},
		{"zero max record", wal.WithMaxRecordSize(0)},
		{"max record below what a Manager writes", wal.WithMaxRecordSize(wal.MinMaxRecordSize - 1)},
		{"huge max record", wal.WithMaxRecordSize(wal.MaxRecordSizeLimit + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "j")
			_, err := wal.Open(dir, tt.opt)
			require.ErrorIs(t, err, wal.ErrInvalidConfig)
			_, err = os.Stat(dir)
			assert.ErrorIs(t, err, os.ErrNotExist, "an invalid configuration creates nothing")
		})
	}
}

func TestSyncModeString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "SyncAlways", wal.SyncAlways.String())
	assert.Equal(t, "SyncNone", wal.SyncNone.String())
	assert.Equal(t, "SyncInterval(10ms)", wal.SyncInterval(10*time.Millisecond).String())
	assert.Equal(t, "SyncMode(invalid)", wal.SyncMode{}.String())
}

func TestOpenLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := wal.Open(dir)
	require.NoError(t, err)
	_, err = wal.Open(dir)
	require.ErrorIs(t, err, wal.ErrLocked)
	require.NoError(t, l.Close())
	l2, err := wal.Open(dir)
	require.NoError(t, err, "Close releases the lock")
	require.NoError(t, l2.Close())
}

func TestClose(t *testing.T) {
	t.Parallel()
	l, err := wal.Open(t.TempDir())
	require.NoError(t, err)
	seq, err := l.Append(1, []byte("buffered, never waited for"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	assert.Equal(t, seq, l.Durable(), "Close flushes and syncs")
	require.NoError(t, l.Wait(seq))
	_, err = l.Append(1, nil)
	require.ErrorIs(t, err, wal.ErrClosed)
	require.ErrorIs(t, l.WriteSnapshot(seq, func(io.Writer) error { return nil }), wal.ErrClosed)
	require.ErrorIs(t, l.Replay(nil, nil), wal.ErrClosed)
	require.NoError(t, l.Close(), "a second Close is a no-op")
}

func TestWaitInvalidSeq(t *testing.T) {
	t.Parallel()
	l := open(t, t.TempDir())
	require.NoError(t, l.Wait(0))
	require.ErrorIs(t, l.Wait(1), wal.ErrInvalidSeq)
	appendWait(t, l, "a")
	require.ErrorIs(t, l.Wait(2), wal.ErrInvalidSeq)
}

func TestSyncModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []wal.SyncMode{wal.SyncAlways, wal.SyncInterval(time.Hour), wal.SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			l, err := wal.Open(dir, wal.WithSyncMode(mode), wal.WithSegmentSize(wal.MinSegmentSize))
			require.NoError(t, err)
			ps := payloads(100, "record %d of a run long enough to rotate")
			appendWait(t, l, ps...)
			assert.Equal(t, uint64(100), l.Durable(), "Wait makes records durable in the mode's sense")
			if mode != wal.SyncNone { // whose Wait writes nothing
				st := l.Stats()
				assert.Equal(t, uint64(100), st.Written)
				assert.Greater(t, st.Segments, 1)
			}
			require.NoError(t, l.Close())

			l = open(t, dir)
			assert.Equal(t, records(1, 1, ps), replayAll(t, l).Records)
		})
	}
}

func TestRotationAndReplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir, wal.WithSegmentSize(wal.MinSegmentSize))
	ps := payloads(200, "payload %04d ........................................................................")
	appendWait(t, l, ps...)
	st := l.Stats()
	assert.Greater(t, st.Segments, 10)
	assert.Equal(t, uint64(200), st.RecordsSinceSnapshot)
	require.NoError(t, l.Close())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var segs []string
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".wal" {
			segs = append(segs, e.Name())
			fi, err := e.Info()
			require.NoError(t, err)
			assert.LessOrEqual(t, fi.Size(), int64(wal.MinSegmentSize), e.Name())
		}
	}
	assert.Len(t, segs, st.Segments)
	assert.Equal(t, "0000000000000001.wal", segs[0])

	l = open(t, dir, wal.WithSegmentSize(wal.MinSegmentSize))
	assert.Equal(t, records(1, 1, ps), replayAll(t, l).Records)
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.WithSegmentSize(wal.MinSegmentSize))
	require.NoError(t, err)
	ps := payloads(300, "payload %04d ........................................")
	appendWait(t, l, ps...)
	before := l.Stats()

	require.NoError(t, l.WriteSnapshot(200, func(w io.Writer) error {
		_, err := io.WriteString(w, "state after 200")
		return err
	}))
	after := l.Stats()
	assert.Equal(t, uint64(200), after.SnapshotSeq)
	assert.Equal(t, uint64(100), after.RecordsSinceSnapshot)
	assert.Less(t, after.Segments, before.Segments, "covered segments are removed")
	assert.Less(t, after.LogBytes, before.LogBytes)
	assert.Equal(t, replayed{200, "state after 200", records(1, 201, ps[200:])}, replayAll(t, l))

	require.ErrorIs(t, l.WriteSnapshot(100, func(io.Writer) error { return nil }), wal.ErrInvalidSeq, "older than the current snapshot")
	require.ErrorIs(t, l.WriteSnapshot(301, func(io.Writer) error { return nil }), wal.ErrInvalidSeq, "never appended")
	require.ErrorIs(t, l.WriteSnapshot(0, func(io.Writer) error { return nil }), wal.ErrInvalidSeq)
	require.NoError(t, l.Close())

	l = open(t, dir, wal.WithSegmentSize(wal.MinSegmentSize))
	rc := l.Recovery()
	assert.Equal(t, uint64(200), rc.SnapshotSeq)
	assert.Equal(t, uint64(300), rc.LastSeq)
	assert.Empty(t, rc.Removed)
	assert.Equal(t, replayed{200, "state after 200", records(1, 201, ps[200:])}, replayAll(t, l))

	// A snapshot of everything: the next record follows it.
	require.NoError(t, l.WriteSnapshot(300, func(w io.Writer) error {
		_, err := io.WriteString(w, "state after 300")
		return err
	}))
	assert.Equal(t, replayed{SnapSeq: 300, SnapData: "state after 300"}, replayAll(t, l))
	seqs := appendWait(t, l, "after the snapshot")
	assert.Equal(t, []uint64{301}, seqs)
	require.NoError(t, l.Close())
	l = open(t, dir)
	assert.Equal(t, replayed{300, "state after 300", []rec{{301, 1, "after the snapshot"}}}, replayAll(t, l))
}

func TestSnapshotWriteError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := open(t, dir)
	appendWait(t, l, "a", "b")
	errBoom := errors.New("boom")
	err := l.WriteSnapshot(2, func(w io.Writer) error {
		_, _ = io.WriteString(w, "partial")
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	assert.NotErrorIs(t, err, wal.ErrFailed, "a failed snapshot does not fail the log")
	_, statErr := os.Stat(filepath.Join(dir, "snapshot.tmp"))
	assert.ErrorIs(t, statErr, os.ErrNotExist, "the temporary file is removed")
	assert.Equal(t, uint64(0), l.Stats().SnapshotSeq)
	appendWait(t, l, "c")
	assert.Equal(t, records(1, 1, []string{"a", "b", "c"}), replayAll(t, l).Records)
}

func TestReplayCallbackError(t *testing.T) {
	t.Parallel()
	l := open(t, t.TempDir())
	appendWait(t, l, "a", "b", "c")
	errStop := errors.New("stop")
	var seen []uint64
	err := l.Replay(nil, func(seq uint64, _ uint8, _ []byte) error {
		seen = append(seen, seq)
		if seq == 2 {
			return errStop
		}
		return nil
	})
	require.ErrorIs(t, err, errStop)
	assert.Equal(t, []uint64{1, 2}, seen)
}

func TestReplayDuringAppends(t *testing.T) {
	t.Parallel()
	l := open(t, t.TempDir(), wal.WithSegmentSize(wal.MinSegmentSize))
	appendWait(t, l, payloads(50, "before %d ....................................")...)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 50 {
			seq, err := l.Append(1, []byte("concurrent ......................................"))
			if err != nil {
				panic(err)
			}
			if err := l.Wait(seq); err != nil {
				panic(err)
			}
		}
	})
	for range 5 {
		var last uint64
		require.NoError(t, l.Replay(nil, func(seq uint64, _ uint8, _ []byte) error {
			require.Equal(t, last+1, seq, "records come in order, without gaps")
			last = seq
			return nil
		}))
		assert.GreaterOrEqual(t, last, uint64(50))
	}
	wg.Wait()
}

func TestConcurrentAppendWait(t *testing.T) {
	t.Parallel()
	goroutines, each := 16, 200
	if testing.Short() {
		each = 50
	}
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.WithSegmentSize(16<<10))
	require.NoError(t, err)
	var wg sync.WaitGroup
	seqs := make([][]uint64, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				seq, err := l.Append(uint8(g+1), fmt.Appendf(nil, "g%d-%d", g, i))
				if err != nil {
					panic(err)
				}
				if err := l.Wait(seq); err != nil {
					panic(err)
				}
				seqs[g] = append(seqs[g], seq)
			}
		})
	}
	wg.Wait()
	st := l.Stats()
	require.NoError(t, l.Close())
	total := goroutines * each
	assert.Equal(t, uint64(total), st.Synced)
	t.Logf("%d records in %d batches, %d fsyncs", total, st.Batches, st.Syncs)

	l = open(t, dir)
	got := replayAll(t, l).Records
	require.Len(t, got, total)
	bySeq := map[uint64]rec{}
	for i, r := range got {
		require.Equal(t, uint64(i+1), r.Seq)
		bySeq[r.Seq] = r
	}
	for g, ss := range seqs {
		assert.True(t, slices.IsSorted(ss), "a goroutine's records keep its order")
		for i, seq := range ss {
			assert.Equal(t, rec{seq, uint8(g + 1), fmt.Sprintf("g%d-%d", g, i)}, bySeq[seq])
		}
	}
}

// TestTinyMaxRecordSize opens a log written before WithMaxRecordSize had a
// minimum, with a limit of 1 (testdata/tinylimit: the records "x", "" and
// "y" of kind 1, each in a batch of its own): its segment is read with the
// limit in its header, commit markers included, and the log goes on with
// today's limit.
func TestTinyMaxRecordSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	segment := "0000000000000001.wal"
	b, err := os.ReadFile(filepath.Join("testdata", "tinylimit", segment))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, segment), b, 0o644))
	l := open(t, dir)
	assert.Nil(t, l.Recovery().Torn, "commit markers are read whatever the record limit")
	assert.Equal(t, records(1, 1, []string{"x", "", "y"}), replayAll(t, l).Records)
	appendWait(t, l, "zz")
	require.NoError(t, l.Close())
	l = open(t, dir)
	assert.Equal(t, 2, l.Recovery().Segments, "a new segment for the new limit")
	assert.Equal(t, records(1, 1, []string{"x", "", "y", "zz"}), replayAll(t, l).Records)
}

func TestMaxRecordSizeChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.WithMaxRecordSize(wal.MinMaxRecordSize+1000))
	require.NoError(t, err)
	big := string(make([]byte, wal.MinMaxRecordSize+900))
	appendWait(t, l, big)
	require.NoError(t, l.Close())

	// A smaller limit still reads the old segment, written with its own
	// limit, and starts a new segment for the new one.
	l, err = wal.Open(dir, wal.WithMaxRecordSize(wal.MinMaxRecordSize))
	require.NoError(t, err)
	assert.Equal(t, 2, l.Recovery().Segments)
	_, err = l.Append(1, []byte(big))
	require.ErrorIs(t, err, wal.ErrRecordTooLarge)
	appendWait(t, l, "small")
	require.NoError(t, l.Close())

	l = open(t, dir)
	assert.Equal(t, []rec{{1, 1, big}, {2, 1, "small"}}, replayAll(t, l).Records)
}

func TestLeftoverFilesRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := wal.Open(dir)
	require.NoError(t, err)
	appendWait(t, l, "a")
	require.NoError(t, l.Close())
	for name, data := range map[string]string{
		"0000000000000002.wal.tmp": "half a segment header",
		"snapshot.tmp":             "half a snapshot",
		"notes.txt":                "not ours",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	l = open(t, dir)
	assert.ElementsMatch(t, []string{"0000000000000002.wal.tmp", "snapshot.tmp"}, l.Recovery().Removed)
	assert.Equal(t, []rec{{1, 1, "a"}}, replayAll(t, l).Records)
	for _, name := range []string{"0000000000000002.wal.tmp", "snapshot.tmp"} {
		_, err := os.Stat(filepath.Join(dir, name))
		assert.ErrorIs(t, err, os.ErrNotExist, name)
	}
	_, err = os.Stat(filepath.Join(dir, "notes.txt"))
	assert.NoError(t, err, "files the log does not name are left alone")
}

func TestMissingMiddleSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.WithSegmentSize(wal.MinSegmentSize))
	require.NoError(t, err)
	appendWait(t, l, payloads(60, "payload %d ............................................")...)
	require.GreaterOrEqual(t, l.Stats().Segments, 3)
	require.NoError(t, l.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "0000000000000002.wal")))

	_, err = wal.Open(dir)
	require.ErrorIs(t, err, wal.ErrCorrupt)
	require.ErrorIs(t, err, wal.ErrMissingSegment)
	var ce *wal.CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "0000000000000003.wal", ce.File)
	assert.Contains(t, err.Error(), "0000000000000002.wal is missing")
}

func TestTornTailOnDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := wal.Open(dir)
	require.NoError(t, err)
	appendWait(t, l, "a", "b")
	require.NoError(t, l.Close())
	seg := filepath.Join(dir, "0000000000000001.wal")
	fi, err := os.Stat(seg)
	require.NoError(t, err)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 4096)) // a preallocated, never written tail
	require.NoError(t, err)
	require.NoError(t, f.Close())

	l, err = wal.Open(dir)
	require.NoError(t, err)
	torn := l.Recovery().Torn
	require.NotNil(t, torn)
	assert.Equal(t, wal.TornTail{File: "0000000000000001.wal", Offset: fi.Size(), Bytes: 4096, Reason: torn.Reason}, *torn)
	assert.ErrorIs(t, torn.Reason, wal.ErrZeroedRecord)
	assert.Equal(t, records(1, 1, []string{"a", "b"}), replayAll(t, l).Records)
	appendWait(t, l, "c")
	require.NoError(t, l.Close())

	l = open(t, dir)
	assert.Nil(t, l.Recovery().Torn, "the repair is durable")
	assert.Equal(t, records(1, 1, []string{"a", "b", "c"}), replayAll(t, l).Records)
}
