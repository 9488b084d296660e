package worklease_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/memjournal"
)

// Tests of replay of journals written at awkward moments: a Forget while a
// snapshot is written, a domain created as the fence floor rises, a call
// cut short between its two records, and Forgets of older releases.

// hookJournal is an in-memory journal with hooks that let a test run a call
// at an awkward moment: before a record is appended, or while a snapshot is
// being written.
type hookJournal struct {
	mu           sync.Mutex
	recs         []worklease.Record // index i = seq i+1
	snap         []byte
	snapSeq      uint64
	beforeAppend func(rec worklease.Record) // called without j.mu, before seq is assigned
	blockWrite   func()                     // called on the snapshot's first Write
}

func (j *hookJournal) AppendRecord(rec worklease.Record) (uint64, error) {
	if h := j.beforeAppend; h != nil {
		h(rec)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	data, _ := rec.MarshalBinary()
	var back worklease.Record
	if err := back.UnmarshalBinary(data); err != nil {
		return 0, err
	}
	j.recs = append(j.recs, back)
	return uint64(len(j.recs)), nil
}

func (j *hookJournal) Wait(seq uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if seq > uint64(len(j.recs)) {
		return errors.New("hookJournal: wait for a record never appended")
	}
	return nil
}

func (j *hookJournal) ReplayRecords(restore func([]byte) error, apply func(uint64, worklease.Record) error) error {
	if j.snap != nil {
		if err := restore(j.snap); err != nil {
			return err
		}
	}
	for i := j.snapSeq; i < uint64(len(j.recs)); i++ {
		if err := apply(i+1, j.recs[i]); err != nil {
			return err
		}
	}
	return nil
}

type hookWriter struct {
	bytes.Buffer
	first func()
}

func (w *hookWriter) Write(p []byte) (int, error) {
	if f := w.first; f != nil {
		w.first = nil
		f()
	}
	return w.Buffer.Write(p)
}

func (j *hookJournal) SnapshotState(write func(io.Writer) error) error {
	j.mu.Lock()
	upTo := uint64(len(j.recs))
	j.mu.Unlock()
	w := &hookWriter{first: j.blockWrite}
	if err := write(w); err != nil {
		return err
	}
	j.snap, j.snapSeq = w.Bytes(), upTo
	return nil
}

func (j *hookJournal) SnapshotDue() bool { return false }
func (j *hookJournal) Close() error      { return nil }

// must returns v, failing the test if err is not nil.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

// A Forget that runs while a snapshot is being written, after the snapshot
// has written the domain, must not bring the domain back on replay.
func TestReplayForgetDuringSnapshot(t *testing.T) {
	t.Parallel()
	j := &hookJournal{}
	m := must(worklease.New(worklease.WithJournal(j)))(t)
	// Many holes, so that D's section outgrows the snapshot's 64 KiB buffer
	// and reaches the journal's writer before the snapshot ends.
	for off := int64(0); off < 80000; off += 2 {
		res := must(m.TryAcquire("D", off))(t)
		must(m.Succeed("D", res.Token))(t)
	}
	j.blockWrite = func() { require.NoError(t, m.Forget("D")) }
	require.NoError(t, m.Snapshot())
	j.blockWrite = nil
	res := must(m.TryAcquire("D", 0))(t) // forgotten: offset 0 runs again
	require.Equal(t, worklease.Acquired, res.Status)
	require.NoError(t, m.Close())

	m2 := must(worklease.New(worklease.WithJournal(j)))(t)
	defer func() { require.NoError(t, m2.Close()) }()
	info := must(m2.Inspect("D"))(t)
	require.True(t, info.Leased)
	require.Equal(t, res.Token, info.Lease.Token)
	require.Zero(t, info.Processed, "the forgotten history stays forgotten")
}

// A domain created live just before another domain's Forget raised the
// fence floor has fences below that floor; replay must accept them.
func TestReplayFenceFloorRace(t *testing.T) {
	t.Parallel()
	j := &hookJournal{}
	m := must(worklease.New(worklease.WithJournal(j)))(t)
	for off := range int64(3) { // E reaches fence 3 and goes idle
		res := must(m.TryAcquire("E", off))(t)
		must(m.Succeed("E", res.Token))(t)
	}
	// D's record exists (fence floor 0) when its first grant is appended;
	// just then another goroutine forgets E, raising the floor to 3.
	done := false
	j.beforeAppend = func(rec worklease.Record) {
		if rec.Domain == "D" && !done {
			done = true
			var wg sync.WaitGroup
			wg.Go(func() { assert.NoError(t, m.Forget("E")) })
			wg.Wait()
		}
	}
	res := must(m.TryAcquire("D", 0))(t)
	j.beforeAppend = nil
	require.Equal(t, uint64(1), res.Token.Fence())
	require.NoError(t, m.Close())

	m2 := must(worklease.New(worklease.WithJournal(j)))(t)
	defer func() { require.NoError(t, m2.Close()) }()
	info := must(m2.Inspect("D"))(t)
	require.Equal(t, res.Token, info.Lease.Token)
	e := must(m2.TryAcquire("E", 0))(t) // E comes back above its old fences
	require.Greater(t, e.Token.Fence(), uint64(3))
}

// A domain forgotten and then brought back without a grant (here by Kill)
// must, after a restart, still grant fences above those of its forgotten
// past.
func TestReplayKeepsFencesAboveAForgottenPast(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m := must(worklease.New(worklease.WithJournal(j)))(t)
	old := must(m.TryAcquire("b", 0))(t)
	must(m.Succeed("b", old.Token))(t)
	require.NoError(t, m.Forget("b"))
	_, err := m.Kill("b", 0, "poison") // the new b has no grant yet
	require.NoError(t, err)
	require.NoError(t, m.Close())

	m2 := must(worklease.New(worklease.WithJournal(j.Reopen())))(t)
	defer func() { require.NoError(t, m2.Close()) }()
	res := must(m2.TryAcquire("b", 1))(t)
	require.Greater(t, res.Token.Fence(), old.Token.Fence())
}

// A call whose first record ends a lease (here ForceRelease's Released)
// can reach the journal without its second, which requeues the offset: an
// append fails between them, or a crash keeps one batch and not the next.
// The call never returned. Replay must leave the journal replayable after
// the restarted Manager goes on, and, with WithMonotonicOffsets, must not
// let the offset count as processed: it never finished.
func TestReplaySettlesACallCutShort(t *testing.T) {
	t.Parallel()
	for _, monotonic := range []bool{false, true} {
		t.Run(fmt.Sprint("monotonic=", monotonic), func(t *testing.T) {
			t.Parallel()
			opts := []worklease.Option{worklease.WithOrdering(worklease.LIFO)}
			if monotonic {
				opts = append(opts, worklease.WithMonotonicOffsets())
			}
			j := &memjournal.Journal{}
			open := func() *worklease.Manager {
				return must(worklease.New(append(opts, worklease.WithJournal(j.Reopen()))...))(t)
			}
			m := open()
			five := must(m.TryAcquire("A", 5))(t)  // record 2, after the settings
			must(m.TryAcquire("A", 3))(t)          // 3: queued below 5
			must(m.Succeed("A", five.Token))(t)    // 4
			three := must(m.TryAcquire("A", 3))(t) // 5
			require.Equal(t, worklease.Acquired, three.Status)
			j.FailAppendAt(7) // ForceRelease writes Released (6), then fails on Requeued (7)
			_, err := m.ForceRelease("A")
			require.ErrorIs(t, err, worklease.ErrJournalFailed)
			require.NoError(t, m.Close())

			// Without the option, 3 is free, as replay has always left it;
			// with it, 3 is back at the front of the line.
			m = open()
			info := must(m.Inspect("A"))(t)
			require.False(t, info.Leased)
			if monotonic {
				require.Equal(t, []int64{3}, info.Backlog)
				require.False(t, worklease.CountsProcessed(m, "A", 3), "3 never finished")
			} else {
				require.Empty(t, info.Backlog)
			}
			again := must(m.TryAcquire("A", 3))(t)
			require.Equal(t, worklease.Acquired, again.Status)
			require.Greater(t, again.Token.Fence(), three.Token.Fence())
			must(m.Succeed("A", again.Token))(t)
			require.NoError(t, m.Close())

			// The journal now holds the lone Released, then the restarted
			// Manager's records; it replays to the same state every time.
			m = open()
			defer func() { require.NoError(t, m.Close()) }()
			info = must(m.Inspect("A"))(t)
			require.False(t, info.Leased)
			require.Empty(t, info.Backlog)
			res := must(m.TryAcquire("A", 3))(t)
			require.Equal(t, worklease.AlreadyProcessed, res.Status)
		})
	}
}

// Forget once took a paused idle domain, dropping its pause; it refuses one
// now, but a journal that holds such a Forget still replays.
func TestReplayForgetOfAPausedDomain(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	for _, rec := range []worklease.Record{
		{Kind: worklease.EventPaused, Domain: "p", Offset: -1},
		{Kind: worklease.EventForgotten, Domain: "p", Offset: -1},
	} {
		_, err := j.AppendRecord(rec)
		require.NoError(t, err)
	}
	m := must(worklease.New(worklease.WithJournal(j)))(t)
	defer func() { require.NoError(t, m.Close()) }()
	require.Equal(t, worklease.DomainInfo{}, must(m.Inspect("p"))(t))
	require.Equal(t, worklease.Acquired, must(m.TryAcquire("p", 1))(t).Status)
}
