package wal

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
)

// TestGroupCommit holds the first batch's fsync while ten more goroutines
// append and wait, then releases it: the ten records go out as one batch with
// one fsync, so the eleven records cost two writes and two fsyncs.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	l := mustOpenMem(t, fsys)
	base := l.Stats()

	entered, gate := holdFirstSync(fsys)

	var wg sync.WaitGroup
	wg.Go(func() {
		seq, err := l.Append(1, []byte("leader"))
		if err == nil {
			err = l.Wait(seq)
		}
		assert.NoError(t, err)
	})
	<-entered // the leader is inside its fsync

	const followers = 10
	var appended sync.WaitGroup
	appended.Add(followers)
	for i := range followers {
		wg.Go(func() {
			seq, err := l.Append(2, []byte{byte(i)})
			appended.Done()
			if err == nil {
				err = l.Wait(seq)
			}
			assert.NoError(t, err)
		})
	}
	appended.Wait() // every follower's record is buffered
	close(gate)
	wg.Wait()

	st := l.Stats()
	assert.Equal(t, uint64(followers+1), st.Synced)
	assert.Equal(t, uint64(2), st.Batches-base.Batches, "one batch for the leader, one for all the followers")
	assert.Equal(t, uint64(2), st.Syncs-base.Syncs, "one fsync per batch")
	assert.Len(t, replayMem(t, l).Records, followers+1)
}

// holdFirstSync makes the first fsync on fsys wait until the test closes
// gate; entered is closed once that fsync has begun.
func holdFirstSync(fsys *memFS) (entered, gate chan struct{}) {
	entered, gate = make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	fsys.setFault(func(op memOp) error {
		if op.kind == opSync && first.CompareAndSwap(false, true) {
			close(entered)
			<-gate
		}
		return nil
	})
	return entered, gate
}

// manualTicker returns a withTicker option whose ticks the test sends, and
// reports whether the ticker was stopped.
func manualTicker() (Option, chan time.Time, *atomic.Bool) {
	tick := make(chan time.Time)
	var stopped atomic.Bool
	return withTicker(func(time.Duration) (<-chan time.Time, func()) {
		return tick, func() { stopped.Store(true) }
	}), tick, &stopped
}

func TestSyncInterval(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	opt, tick, stopped := manualTicker()
	l, err := openMem(fsys, WithSyncMode(SyncInterval(time.Hour)), opt)
	require.NoError(t, err)
	syncs := fsys.countOps(opSync, segmentSuffix)

	seq, err := l.Append(1, []byte("written, not yet synced"))
	require.NoError(t, err)
	require.NoError(t, l.Wait(seq))
	st := l.Stats()
	assert.Equal(t, seq, st.Written)
	assert.Equal(t, uint64(0), st.Synced)
	assert.Equal(t, seq, l.Durable(), "Wait's guarantee under SyncInterval: written")
	assert.Equal(t, syncs, fsys.countOps(opSync, segmentSuffix), "Wait did not fsync")
	assert.Contains(t, string(fsys.files(dir)[segmentName(1)]), "written, not yet synced")

	// The loop receives one tick at a time, so once it takes the second,
	// it has finished the sync of the first.
	tick <- time.Time{}
	tick <- time.Time{}
	assert.Equal(t, seq, l.Stats().Synced)
	assert.Equal(t, syncs+1, fsys.countOps(opSync, segmentSuffix), "one fsync for two ticks: nothing new the second time")

	// A crash now keeps the record: it was synced by the tick.
	l2 := mustOpenMem(t, fsys.crash(crashDropAll, 0))
	assert.Len(t, replayMem(t, l2).Records, 1)

	require.NoError(t, l.Close())
	assert.True(t, stopped.Load(), "Close stops the ticker")
}

// TestSyncNone drives SyncNone's write-behind with a manual ticker. Wait does
// no I/O; a tick writes everything buffered as one batch, without an fsync,
// and a tick with nothing new does nothing; only segment switches fsync. A
// crash of the process keeps every record up to the last tick and loses the
// rest, a crash of the machine keeps a prefix, and Close writes and fsyncs
// everything. It runs in a synctest bubble: once synctest.Wait returns after
// a tick, the goroutine is blocked again, waiting for the next one, and has
// done all the tick's work.
func TestSyncNone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fsys := newMemFS()
		opt, tick, stopped := manualTicker()
		l, err := openMem(fsys, WithSyncMode(SyncNone), WithSegmentSize(MinSegmentSize), opt)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() }) // should the test fail: a goroutine must not outlive the bubble
		syncsAtOpen := l.Stats().Syncs
		batches := batchPayloads(42, 2, 40) // the last two are never ticked
		all := recordsOf(batches)

		var next, ticked uint64 = 1, 0 // next to append; last written by a tick
		var tickedAt []uint64          // ticked after each tick
		for i, b := range batches {
			for _, p := range b {
				seq, err := l.Append(1, []byte(p))
				require.NoError(t, err)
				require.Equal(t, next, seq)
				next++
			}
			ops, batchCount := fsys.opCount(), l.Stats().Batches
			require.NoError(t, l.Wait(next-1))
			require.Equal(t, ops, fsys.opCount(), "Wait does no I/O")
			st := l.Stats()
			require.Equal(t, ticked, st.Written, "Wait wrote nothing")
			require.Equal(t, batchCount, st.Batches)
			require.Equal(t, next-1, l.Durable(), "Durable is the last appended: Wait returns for it without writing")

			if i%4 == 3 {
				tick <- time.Time{}
				synctest.Wait()
				ticked = next - 1
				tickedAt = append(tickedAt, ticked)
				st := l.Stats()
				require.Equal(t, ticked, st.Written, "a tick writes everything buffered")
				require.Equal(t, batchCount+1, st.Batches, "as one batch")
				ops := fsys.opCount()
				tick <- time.Time{}
				synctest.Wait()
				require.Equal(t, ops, fsys.opCount(), "a tick with nothing new does nothing")
			}
		}
		// Acknowledged, never written: the last two batches.
		require.Equal(t, uint64(len(all)), next-1)
		require.Less(t, ticked, next-1)
		st := l.Stats()
		require.Greater(t, st.Segments, 2)
		// Only segment switches fsync: the old segment, and the new one's
		// header.
		assert.Equal(t, syncsAtOpen+2*uint64(st.Segments-1), st.Syncs)
		assert.Less(t, st.Synced, st.Written)
		assert.Contains(t, tickedAt, st.Synced, "a segment switch syncs up to the end of a tick's batch")

		// A crash of the process keeps what the ticks wrote, exactly.
		proc := mustOpenMem(t, fsys.crash(crashKeepAll, 0))
		assert.Equal(t, all[:ticked], replayMem(t, proc).Records)

		// A crash of the machine keeps a prefix, at least what was synced.
		crashed := mustOpenMem(t, fsys.crash(crashDropAll, 0))
		got := replayMem(t, crashed).Records
		assert.Equal(t, all[:len(got)], got)
		assert.GreaterOrEqual(t, uint64(len(got)), st.Synced)

		require.NoError(t, l.Close())
		assert.True(t, stopped.Load(), "Close stops the ticker")
		l = mustOpenMem(t, fsys.crash(crashDropAll, 0))
		assert.Equal(t, all, replayMem(t, l).Records, "Close writes and fsyncs")
	})
}

// TestWriteBehind runs SyncNone's goroutine on its real ticker: a record
// whose Wait wrote nothing reaches the operating system, without an fsync,
// with no other call. Close stops the goroutine; TestMain's goleak check
// would fail the package if it leaked.
func TestWriteBehind(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	l, err := openMem(fsys, WithSyncMode(SyncNone))
	require.NoError(t, err)
	syncs := fsys.countOps(opSync, segmentSuffix)
	seq, err := l.Append(1, []byte("written behind"))
	require.NoError(t, err)
	require.NoError(t, l.Wait(seq))

	// Eventually, not within a time: a slow machine only takes longer.
	require.Eventually(t, func() bool { return l.Stats().Written == seq }, 10*time.Second, time.Millisecond)
	assert.Contains(t, string(fsys.files(dir)[segmentName(1)]), "written behind")
	assert.Equal(t, uint64(0), l.Stats().Synced)
	assert.Equal(t, syncs, fsys.countOps(opSync, segmentSuffix), "the write-behind does not fsync")

	require.NoError(t, l.Close())
	select {
	case <-l.syncDone:
	default:
		t.Fatal("Close returned before the write-behind goroutine")
	}
	assert.Equal(t, seq, l.Stats().Synced, "Close fsyncs")
}

// An appendCase adds one record to a Log, raw or as a worklease.Record.
type appendCase struct {
	name string
	size int // bytes each record adds to what is buffered
	add  func(l *Log) (uint64, error)
}

func appendCases(t testing.TB) []appendCase {
	payload := bytes.Repeat([]byte("x"), 1000)
	rec := worklease.Record{Kind: worklease.EventAcquired, Domain: "early", Offset: 7, At: time.Unix(1, 0)}
	return []appendCase{
		{"Append", frameHeaderSize + len(payload), func(l *Log) (uint64, error) { return l.Append(1, payload) }},
		{"AppendRecord", frameHeaderSize + len(binaryOf(t, rec)), func(l *Log) (uint64, error) { return l.AppendRecord(rec) }},
	}
}

// TestWriteBehindEarly checks that under SyncNone, Append and AppendRecord
// wake the write-behind goroutine once writeBehindEarly bytes are buffered,
// so that it writes them without waiting
// for its tick, and not before.
func TestWriteBehindEarly(t *testing.T) {
	t.Parallel()
	for _, tc := range appendCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// In a bubble, synctest.Wait returns once the goroutine is
			// blocked again, waiting for a tick or a wake-up.
			synctest.Test(t, func(t *testing.T) {
				opt, _, _ := manualTicker() // never ticks
				l := mustOpenMem(t, newMemFS(), WithSyncMode(SyncNone), opt)
				for range (writeBehindEarly - 1) / tc.size {
					_, err := tc.add(l)
					require.NoError(t, err)
				}
				synctest.Wait()
				require.Zero(t, l.Stats().Written, "below writeBehindEarly, nothing is written before a tick")
				seq, err := tc.add(l)
				require.NoError(t, err)
				synctest.Wait()
				assert.Equal(t, seq, l.Stats().Written, "the goroutine wrote everything without a tick")
				require.NoError(t, l.Close())
			})
		})
	}
}

// TestAppendFlushesLargeBuffer checks that a caller who never waits cannot
// grow the buffer without bound, with Append or with AppendRecord: once flushThreshold bytes are
// buffered, the call writes them itself. With the early wake-up turned off
// nothing else writes; with it on, the write-behind goroutine mostly does,
// and the bound holds all the same.
func TestAppendFlushesLargeBuffer(t *testing.T) {
	t.Parallel()
	for _, tc := range appendCases(t) {
		for _, early := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/early=%v", tc.name, early), func(t *testing.T) {
				t.Parallel()
				opt, _, _ := manualTicker() // never ticks
				l := mustOpenMem(t, newMemFS(), WithSyncMode(SyncNone), opt)
				if !early {
					l.wake = nil // see TestWriteBehindEarly
				}
				for i := range flushThreshold/tc.size + 1 {
					_, err := tc.add(l)
					require.NoError(t, err)
					l.mu.Lock()
					buffered := len(l.buf)
					l.mu.Unlock()
					require.Less(t, buffered, flushThreshold, "after record %d", i+1)
				}
				if !early {
					assert.Positive(t, l.Stats().Written, "the caller wrote")
				} else { // the goroutine may still be writing
					assert.Eventually(t, func() bool { return l.Stats().Written > 0 }, 10*time.Second, time.Millisecond)
				}
			})
		}
	}
}

// TestReentrantCalls calls back into the log from the functions it calls:
// nothing deadlocks, a nested WriteSnapshot is refused, and segments are not
// removed under a running Replay.
func TestReentrantCalls(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	l := mustOpenMem(t, fsys, WithSegmentSize(MinSegmentSize))
	batches := batchPayloads(30, 2, 40)
	ends := writeBatches(t, l, batches)

	err := l.WriteSnapshot(ends[5].lastSeq, func(w io.Writer) error {
		require.ErrorIs(t, l.WriteSnapshot(ends[5].lastSeq, func(io.Writer) error { return nil }), ErrSnapshotInProgress)
		require.NoError(t, l.Replay(nil, nil))
		seq, err := l.Append(1, []byte("during the snapshot"))
		require.NoError(t, err)
		require.NoError(t, l.Wait(seq))
		_, err = w.Write([]byte("state"))
		return err
	})
	require.NoError(t, err)
	batches = append(batches, []string{"during the snapshot"})

	segsBefore := l.Stats().Segments
	snapSeq := ends[20].lastSeq
	var inner error
	require.NoError(t, l.Replay(nil, func(seq uint64, _ uint8, _ []byte) error {
		if seq == snapSeq {
			inner = l.WriteSnapshot(snapSeq, func(w io.Writer) error {
				_, err := w.Write([]byte("state 2"))
				return err
			})
		}
		return nil
	}))
	require.NoError(t, inner)
	assert.Equal(t, segsBefore, l.Stats().Segments, "no segment is removed under a Replay")
	require.NoError(t, l.WriteSnapshot(snapSeq, func(w io.Writer) error {
		_, err := w.Write([]byte("state 3"))
		return err
	}))
	assert.Less(t, l.Stats().Segments, segsBefore, "the next snapshot removes them")
	got := replayMem(t, l)
	assert.Equal(t, ireplayed{snapSeq, "state 3", recordsOf(batches)[snapSeq:]}, got)
}

// TestCloseDuringWaits closes the log while goroutines append and wait: each
// Append either succeeds, and its Wait returns nil, or returns ErrClosed.
func TestCloseDuringWaits(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	l, err := openMem(fsys)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var acked atomic.Int64
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			for {
				seq, err := l.Append(1, []byte("r"))
				if err != nil {
					assert.ErrorIs(t, err, ErrClosed)
					return
				}
				assert.NoError(t, l.Wait(seq))
				acked.Add(1)
			}
		})
	}
	close(start)
	l.flush.Lock()
	for l.flush.synced < 50 {
		l.flush.cond.Wait() // woken by every flush
	}
	l.flush.Unlock()
	require.NoError(t, l.Close())
	wg.Wait()
	l = mustOpenMem(t, fsys.crash(crashDropAll, 0))
	assert.GreaterOrEqual(t, int64(len(replayMem(t, l).Records)), acked.Load())
}

// TestWriteDuringSync holds an fsync and checks that a write needing none
// (SyncNone's write-behind, or an Append that finds the buffer full) goes
// ahead meanwhile, instead of waiting for the disk.
func TestWriteDuringSync(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	l := mustOpenMem(t, fsys) // SyncAlways
	entered, gate := holdFirstSync(fsys)
	var wg sync.WaitGroup
	wg.Go(func() {
		seq, err := l.Append(1, []byte("synced"))
		if err == nil {
			err = l.Wait(seq)
		}
		assert.NoError(t, err)
	})
	<-entered // its fsync is held

	seq, err := l.Append(2, []byte("written meanwhile"))
	require.NoError(t, err)
	written := make(chan error, 1)
	go func() { written <- l.waitFor(seq, false) }()
	select {
	case err := <-written:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(gate)
		t.Fatal("a write waited for an fsync it did not need")
	}
	st := l.Stats()
	assert.Equal(t, seq, st.Written)
	assert.Less(t, st.Synced, seq, "the held fsync cannot cover a record written after it began")

	close(gate)
	wg.Wait()
	require.NoError(t, l.Wait(seq))
	assert.Equal(t, seq, l.Stats().Synced)
	assert.Len(t, replayMem(t, l).Records, 2)
}

// TestSyncBehind checks that under SyncNone, once syncBehindBytes written
// bytes are unsynced, a background fsync covers them, and not before.
func TestSyncBehind(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		opt, tick, _ := manualTicker()
		fsys := newMemFS()
		l := mustOpenMem(t, fsys, WithSyncMode(SyncNone), opt)
		syncs := fsys.countOps(opSync, segmentSuffix)
		payload := bytes.Repeat([]byte("x"), 64<<10)
		appendBytes := func(n int) (seq uint64) {
			for range n / len(payload) {
				var err error
				seq, err = l.Append(1, payload)
				require.NoError(t, err)
			}
			return seq
		}

		seq := appendBytes(syncBehindBytes / 2)
		tick <- time.Now()
		synctest.Wait()
		require.Equal(t, seq, l.Stats().Written)
		require.Zero(t, l.Stats().Synced, "half of syncBehindBytes stays unsynced")

		seq = appendBytes(syncBehindBytes / 2)
		tick <- time.Now()
		synctest.Wait()
		assert.Equal(t, seq, l.Stats().Synced, "the background fsync covers what was written")
		assert.Equal(t, syncs+1, fsys.countOps(opSync, segmentSuffix), "with one fsync")
		require.NoError(t, l.Close())
	})
}
