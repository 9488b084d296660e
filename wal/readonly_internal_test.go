package wal

import (
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadOnlyChangesNothing opens, with WithReadOnly, a log that needs every
// repair a writable Open makes (a leftover temporary file, a segment an
// interrupted WriteSnapshot left behind, a torn tail), under a fault that
// fails every operation that would change the file system or take the
// exclusive lock. The read-only Log must report the same repairs a writable
// Open then makes, replay what the writable one replays, and leave every
// byte as it was.
func TestReadOnlyChangesNothing(t *testing.T) {
	t.Parallel()
	opts := []Option{WithSegmentSize(MinSegmentSize)}
	batches := batchPayloads(12, 3, 100) // about 1 KiB per 3 batches: several segments
	fsys, ends := buildLog(t, batches, opts...)
	require.Greater(t, len(fsys.fileNames(dir)), 3, "the test needs several segments")

	// A snapshot covering the first segment, which WriteSnapshot removes;
	// put it back as a crash between the rename and the remove leaves it.
	first := fsys.files(dir)[ends[0].seg]
	l := mustOpenMem(t, fsys, opts...)
	snapSeq := ends[len(ends)-1].lastSeq - 4
	require.NoError(t, l.WriteSnapshot(snapSeq, func(w io.Writer) error {
		_, err := io.WriteString(w, "state")
		return err
	}))
	require.NoError(t, l.Close())
	require.NotContains(t, fsys.fileNames(dir), ends[0].seg)
	fsys.setFile(dir, ends[0].seg, first)
	fsys.setFile(dir, snapshotName+tempSuffix, []byte("half a snapshot"))
	lastSeg := ends[len(ends)-1].seg
	fsys.setFile(dir, lastSeg, append(fsys.files(dir)[lastSeg], 40, 0, 0, 0, 1, 2, 3))

	before := fsys.files(dir)
	ops := fsys.opCount()
	fsys.setFault(func(op memOp) error {
		if op.kind <= opDrop || op.kind == opLock {
			return errors.New("a read-only Log must not " + op.kind.String())
		}
		return nil
	})
	ro, err := openMem(fsys, append(opts, WithReadOnly())...)
	require.NoError(t, err)
	rc := ro.Recovery()
	assert.True(t, rc.ReadOnly)
	assert.False(t, rc.Created)
	require.NotNil(t, rc.Torn)
	assert.Equal(t, lastSeg, rc.Torn.File)
	assert.Equal(t, int64(7), rc.Torn.Bytes)
	assert.ErrorIs(t, rc.Torn.Reason, ErrUnexpectedEOF)
	assert.ElementsMatch(t, []string{snapshotName + tempSuffix, ends[0].seg}, rc.Removed)
	assert.Equal(t, snapSeq, rc.SnapshotSeq)
	assert.Equal(t, ends[len(ends)-1].lastSeq, rc.LastSeq)
	all := recordsOf(batches)
	want := ireplayed{SnapSeq: snapSeq, SnapData: "state", Records: all[snapSeq:]}
	assert.Equal(t, want, replayMem(t, ro))
	st := ro.Stats()
	assert.Equal(t, rc.LastSeq, st.LastSeq)
	assert.Equal(t, uint64(4), st.RecordsSinceSnapshot)
	assert.Equal(t, rc.Segments, st.Segments)

	_, err = ro.Append(1, []byte("x"))
	assert.ErrorIs(t, err, ErrReadOnly)
	require.NoError(t, ro.Close())
	assert.Equal(t, ops, fsys.opCount(), "no operation that changes the file system")
	assert.Equal(t, before, fsys.files(dir))
	assert.Zero(t, fsys.openFiles(), "every file closed")

	// A writable Open makes exactly the repairs the read-only one reported.
	fsys.setFault(nil)
	w := mustOpenMem(t, fsys, opts...)
	wrc := w.Recovery()
	assert.False(t, wrc.ReadOnly)
	assert.Equal(t, rc.Torn, wrc.Torn)
	assert.ElementsMatch(t, rc.Removed, wrc.Removed)
	assert.Equal(t, rc.LastSeq, wrc.LastSeq)
	assert.Equal(t, rc.Segments, wrc.Segments)
	assert.Equal(t, want, replayMem(t, w))
	after := fsys.files(dir)
	for _, name := range rc.Removed {
		assert.NotContains(t, after, name)
	}
	assert.Len(t, after[lastSeg], len(before[lastSeg])-7, "the torn tail is cut now")
}

// TestReadOnlyCorruption checks that a read-only Open reports the same
// corruption as a writable one, and releases what it opened.
func TestReadOnlyCorruption(t *testing.T) {
	t.Parallel()
	opts := []Option{WithSegmentSize(MinSegmentSize)}
	fsys, ends := buildLog(t, batchPayloads(12, 3, 100), opts...)
	seg := slices.Clone(fsys.files(dir)[ends[0].seg])
	seg[segmentHeaderSize+20] ^= 0x40 // inside the first record of a sealed segment
	fsys.setFile(dir, ends[0].seg, seg)
	ops := fsys.opCount()

	_, err := openMem(fsys, append(opts, WithReadOnly())...)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, ends[0].seg, ce.File)
	assert.Equal(t, int64(segmentHeaderSize), ce.Offset)
	assert.Equal(t, ops, fsys.opCount())
	assert.Zero(t, fsys.openFiles())

	_, werr := openMem(fsys, opts...)
	assert.Equal(t, err.Error(), werr.Error())
}

// TestReadOnlyIgnoresWriteOptions checks that a read-only Log starts no
// SyncInterval or SyncNone goroutine and rotates nothing for a changed
// record limit.
func TestReadOnlyIgnoresWriteOptions(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncInterval(1), SyncNone} {
		fsys, _ := buildLog(t, testBatches)
		ticks := 0
		ro, err := openMem(fsys, WithReadOnly(), WithMaxRecordSize(MinMaxRecordSize+77), WithSyncMode(mode),
			withTicker(func(d time.Duration) (<-chan time.Time, func()) {
				ticks++
				return nil, func() {}
			}))
		require.NoError(t, err, mode)
		assert.Equal(t, 1, ro.Recovery().Segments, mode)
		assert.Zero(t, ticks, mode)
		assert.Equal(t, recordsOf(testBatches), replayMem(t, ro).Records, mode)
		assert.Equal(t, uint64(len(recordsOf(testBatches))), ro.Durable(), mode)
		require.NoError(t, ro.Close(), mode)
		assert.Zero(t, fsys.openFiles(), mode)
	}
}
