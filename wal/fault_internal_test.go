package wal

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errInjected = errors.New("injected fault")

// failWhen returns a fault that fails the first operation matching match
// with err, and passes every other.
func failWhen(match func(op memOp) bool, err error) func(op memOp) error {
	var fired atomic.Bool
	return func(op memOp) error {
		if match(op) && fired.CompareAndSwap(false, true) {
			return err
		}
		return nil
	}
}

func isSegment(op memOp) bool { return strings.Contains(op.path, segmentSuffix) }
func isNewSegment(op memOp) bool {
	return strings.HasSuffix(op.path, segmentSuffix+tempSuffix) && op.kind != opRename || op.kind == opRename && isSegment(op)
}

// TestFailClosed injects one fault into the writes, fsyncs and directory
// operations of a running log, and checks that the log fails closed: the
// failing Wait and every later call return an error wrapping ErrFailed and the
// cause, no fsync is attempted afterwards, and reopening after a crash yields
// exactly the acknowledged records.
func TestFailClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		match func(op memOp) bool
		err   error
	}{
		{"batch write", func(op memOp) bool { return op.kind == opWrite && op.off > 0 && isSegment(op) }, errInjected},
		{"short batch write", func(op memOp) bool { return op.kind == opWrite && op.off > 0 && isSegment(op) }, &errShort{keep: 7, err: errInjected}},
		{"batch fsync", func(op memOp) bool { return op.kind == opSync && isSegment(op) }, errInjected},
		{"create next segment", func(op memOp) bool { return op.kind == opCreate && isNewSegment(op) }, errInjected},
		{"write next segment header", func(op memOp) bool { return op.kind == opWrite && op.off == 0 && isNewSegment(op) }, errInjected},
		{"short segment header", func(op memOp) bool { return op.kind == opWrite && op.off == 0 && isNewSegment(op) }, &errShort{keep: 5, err: errInjected}},
		{"sync next segment", func(op memOp) bool { return op.kind == opSync && isNewSegment(op) }, errInjected},
		{"rename next segment", func(op memOp) bool { return op.kind == opRename && isNewSegment(op) }, errInjected},
		{"sync directory", func(op memOp) bool { return op.kind == opSyncDir }, errInjected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := newMemFS()
			l, err := openMem(fsys, WithSegmentSize(MinSegmentSize))
			require.NoError(t, err)
			batches := batchPayloads(60, 3, 30)
			var acked []irec
			ackBatch := func(b []string) error {
				var last uint64
				for _, p := range b {
					seq, err := l.Append(1, []byte(p))
					if err != nil {
						return err
					}
					last = seq
				}
				if err := l.Wait(last); err != nil {
					return err
				}
				for i, p := range b {
					acked = append(acked, irec{last - uint64(len(b)-1-i), 1, p})
				}
				return nil
			}
			for _, b := range batches[:3] {
				require.NoError(t, ackBatch(b))
			}
			fsys.setFault(failWhen(tt.match, tt.err))
			var failed error
			for _, b := range batches[3:] {
				if failed = ackBatch(b); failed != nil {
					break
				}
			}
			require.Error(t, failed, "the fault must fire")
			require.ErrorIs(t, failed, ErrFailed)
			require.ErrorIs(t, failed, errInjected)
			failedAt := fsys.opCount()

			_, err = l.Append(1, []byte("after"))
			require.ErrorIs(t, err, ErrFailed)
			require.ErrorIs(t, l.Wait(1), errInjected, "even a record durable before")
			require.ErrorIs(t, l.WriteSnapshot(1, func(io.Writer) error { return nil }), ErrFailed)
			require.ErrorIs(t, l.Replay(nil, nil), ErrFailed)
			require.ErrorIs(t, l.Close(), ErrFailed)
			for _, op := range fsys.ops()[failedAt:] {
				require.NotEqual(t, opSync, op.kind, "no fsync after a failure: %v", op)
			}
			require.Zero(t, fsys.openFiles())
			fsys.setFault(nil)

			// A crash now keeps exactly what was acknowledged.
			l = mustOpenMem(t, fsys.crash(crashDropAll, 0))
			require.Equal(t, acked, replayMem(t, l).Records)

			// Reopening without a crash keeps at least that, and a prefix
			// of what was appended.
			l = mustOpenMem(t, fsys)
			got := replayMem(t, l).Records
			require.GreaterOrEqual(t, len(got), len(acked))
			assert.Equal(t, acked, got[:len(acked)])
			assert.Equal(t, recordsOf(batches)[:len(got)], got)
			for _, name := range fsys.fileNames(dir) {
				assert.False(t, isTempName(name), "leftover %s", name)
			}
		})
	}
}

// TestWriteBehindFails fails the write of SyncNone's write-behind goroutine.
// Wait, which does no I/O under SyncNone, still makes the same checks: it
// refuses a sequence number never appended, and once the goroutine failed
// the log, it returns the failure, even for a record it acknowledged before.
// Append and Close return it too, and nothing is fsynced afterwards.
func TestWriteBehindFails(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fsys := newMemFS()
		opt, tick, stopped := manualTicker()
		l, err := openMem(fsys, WithSyncMode(SyncNone), opt)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() }) // should the test fail: a goroutine must not outlive the bubble
		seq, err := l.Append(1, []byte("acknowledged"))
		require.NoError(t, err)
		require.NoError(t, l.Wait(seq))
		require.ErrorIs(t, l.Wait(seq+1), ErrInvalidSeq)

		fsys.setFault(failWhen(func(op memOp) bool { return op.kind == opWrite && isSegment(op) }, errInjected))
		tick <- time.Time{}
		synctest.Wait() // the goroutine has failed the log
		failedAt := fsys.opCount()
		err = l.Wait(seq)
		require.ErrorIs(t, err, ErrFailed)
		require.ErrorIs(t, err, errInjected)
		_, err = l.Append(1, []byte("after"))
		require.ErrorIs(t, err, ErrFailed)
		require.ErrorIs(t, l.Close(), ErrFailed)
		assert.True(t, stopped.Load())
		for _, op := range fsys.ops()[failedAt:] {
			require.NotEqual(t, opSync, op.kind, "no fsync after a failure: %v", op)
		}
		require.Zero(t, fsys.openFiles())
	})
}

// TestSnapshotFaults injects faults into WriteSnapshot. Faults before the
// rename leave the log working and no temporary file behind; later ones fail
// it, and reopening recovers every record.
func TestSnapshotFaults(t *testing.T) {
	t.Parallel()
	isSnapTmp := func(op memOp) bool { return strings.HasSuffix(op.path, snapshotName+tempSuffix) }
	tests := []struct {
		name  string
		match func(op memOp) bool
		fatal bool
	}{
		{"create", func(op memOp) bool { return op.kind == opCreate && isSnapTmp(op) }, false},
		{"write", func(op memOp) bool { return op.kind == opWrite && isSnapTmp(op) }, false},
		{"fsync", func(op memOp) bool { return op.kind == opSync && isSnapTmp(op) }, false},
		{"rename", func(op memOp) bool { return op.kind == opRename && isSnapTmp(op) }, true},
		{"sync directory", func(op memOp) bool { return op.kind == opSyncDir }, true},
		{"remove a covered segment", func(op memOp) bool { return op.kind == opRemove && isSegment(op) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			batches := batchPayloads(30, 2, 40)
			fsys := newMemFS()
			l, err := openMem(fsys, WithSegmentSize(MinSegmentSize))
			require.NoError(t, err)
			ends := writeBatches(t, l, batches)
			snapSeq := ends[20].lastSeq
			fsys.setFault(failWhen(tt.match, errInjected))
			err = l.WriteSnapshot(snapSeq, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "state at %d", snapSeq)
				return err
			})
			require.ErrorIs(t, err, errInjected)
			fsys.setFault(nil)
			if tt.fatal {
				require.ErrorIs(t, err, ErrFailed)
				require.ErrorIs(t, l.Close(), ErrFailed)
			} else {
				require.NotErrorIs(t, err, ErrFailed)
				assert.NotContains(t, fsys.fileNames(dir), snapshotName+tempSuffix)
				assert.Equal(t, uint64(0), l.Stats().SnapshotSeq)
				writeBatches(t, l, [][]string{{"still works"}})
				require.NoError(t, l.Close())
				batches = append(batches, []string{"still works"})
			}

			l = mustOpenMem(t, fsys)
			got := replayMem(t, l)
			all := recordsOf(batches)
			if got.SnapSeq > 0 {
				assert.Equal(t, snapSeq, got.SnapSeq)
				assert.Equal(t, fmt.Sprintf("state at %d", snapSeq), got.SnapData)
			}
			assert.Equal(t, all[got.SnapSeq:], got.Records)
			if tt.name == "remove a covered segment" {
				assert.NotEmpty(t, l.Recovery().Removed, "Open finishes the removal")
			}
		})
	}
}

// TestOpenFaults injects faults into Open. Open returns the error, leaves no
// file open, releases the lock, and a later Open succeeds.
func TestOpenFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing bool // a log with a torn tail exists; otherwise Open creates one
		match    func(op memOp) bool
	}{
		{"read directory", true, func(op memOp) bool { return op.kind == opReadDir }},
		{"lock", true, func(op memOp) bool { return op.kind == opLock }},
		{"open a segment", true, func(op memOp) bool { return op.kind == opOpen && isSegment(op) }},
		{"read a segment", true, func(op memOp) bool { return op.kind == opRead && isSegment(op) && op.off > 0 }},
		{"truncate the torn tail", true, func(op memOp) bool { return op.kind == opTruncate }},
		{"sync the last segment", true, func(op memOp) bool { return op.kind == opSync }},
		{"make the directory", false, func(op memOp) bool { return op.kind == opMkdir }},
		{"create the first segment", false, func(op memOp) bool { return op.kind == opCreate }},
		{"rename the first segment", false, func(op memOp) bool { return op.kind == opRename }},
		{"sync the directory", false, func(op memOp) bool { return op.kind == opSyncDir }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := newMemFS()
			if tt.existing {
				var ends []batchEnd
				fsys, ends = buildLog(t, testBatches)
				seg := fsys.files(dir)[ends[0].seg]
				fsys.setFile(dir, ends[0].seg, append(seg, "torn"...))
			}
			fsys.setFault(failWhen(tt.match, errInjected))
			_, err := openMem(fsys)
			require.ErrorIs(t, err, errInjected)
			assert.Zero(t, fsys.openFiles())
			fsys.setFault(nil)

			l := mustOpenMem(t, fsys)
			if tt.existing {
				assert.Equal(t, recordsOf(testBatches), replayMem(t, l).Records)
			} else {
				assert.True(t, l.Recovery().Created)
			}
			for _, name := range fsys.fileNames(dir) {
				assert.False(t, isTempName(name), "leftover %s", name)
			}
		})
	}
}
