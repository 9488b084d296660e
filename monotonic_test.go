package worklease_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/internal/memjournal"
)

// Tests of WithMonotonicOffsets: every offset at or below a domain's
// highest terminal offset (hw) that is not failed, queued or in flight
// counts as processed.

// process acquires offset in domain and succeeds it.
func process(t *testing.T, m *worklease.Manager, domain string, offset int64) worklease.SucceedResult {
	t.Helper()
	res := acquire(t, m, domain, offset, worklease.Acquired)
	sres, err := m.Succeed(domain, res.Token)
	require.NoError(t, err)
	return sres
}

// A domain that sees a sparse, increasing subsequence of offsets answers
// AlreadyProcessed for all of them afterwards, and for every offset below
// the highest it never saw.
func TestMonotonicSparseOffsets(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, worklease.WithMonotonicOffsets())
	for _, off := range []int64{3, 17, 42, 108} {
		process(t, m, "user-1", off)
	}
	for _, off := range []int64{3, 17, 42, 108} {
		acquire(t, m, "user-1", off, worklease.AlreadyProcessed)
	}
	for _, off := range []int64{0, 4, 16, 41, 107} { // never seen, below hw
		acquire(t, m, "user-1", off, worklease.AlreadyProcessed)
	}
	info := inspect(t, m, "user-1")
	assert.EqualValues(t, 109, info.Processed, "every offset in [0, 108]")
	assert.Zero(t, info.Failed)
	runs, failed := worklease.TerminalRuns(m, "user-1")
	assert.Equal(t, [][2]int64{{0, 108}}, runs)
	assert.Empty(t, failed)

	// Above hw, offsets are new work; other domains are independent.
	process(t, m, "user-1", 250)
	acquire(t, m, "user-1", 200, worklease.AlreadyProcessed)
	acquire(t, m, "user-2", 5, worklease.Acquired)
}

// Without the option nothing changes: an offset never seen is never reported
// processed.
func TestExactOffsetsByDefault(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	for _, off := range []int64{3, 17, 42} {
		process(t, m, "user-1", off)
	}
	acquire(t, m, "user-1", 17, worklease.AlreadyProcessed)
	assert.False(t, worklease.CountsProcessed(m, "user-1", 4))
	assert.EqualValues(t, 3, inspect(t, m, "user-1").Processed)
	runs, _ := worklease.TerminalRuns(m, "user-1")
	assert.Equal(t, [][2]int64{{3, 3}, {17, 17}, {42, 42}}, runs)
	process(t, m, "user-1", 4) // never seen: new work
	_, err := m.Kill("user-1", 5, "poison")
	require.NoError(t, err, "never seen: killed before it arrives")
}

// A consumer that restarts re-reads its partition from an older commit and
// offers every offset again. Each offset runs once; the replayed ones
// answer AlreadyProcessed.
func TestMonotonicReplayAfterConsumerRestart(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, worklease.WithMonotonicOffsets())
	key := func(off int64) string { return fmt.Sprint("key-", off%3) } // a partition split by key
	runs := map[int64]int{}
	consume := func(from, to int64) (replayed []int64) {
		for off := from; off <= to; off++ {
			res, err := m.TryAcquire(key(off), off)
			require.NoError(t, err)
			switch res.Status {
			case worklease.Acquired:
				runs[off]++
				_, err := m.Succeed(key(off), res.Token)
				require.NoError(t, err)
			case worklease.AlreadyProcessed:
				replayed = append(replayed, off)
			default:
				t.Fatalf("TryAcquire(%q, %d) = %v", key(off), off, res.Status)
			}
		}
		return replayed
	}
	require.Empty(t, consume(0, 69))
	require.Equal(t, rangeStep(50, 70, 1), consume(50, 99), "the restart replays 50..69")
	for off := range int64(100) {
		require.Equal(t, 1, runs[off], "offset %d ran once", off)
	}
	for k, hw := range map[string]int64{"key-0": 99, "key-1": 97, "key-2": 98} {
		assert.EqualValues(t, hw+1, inspect(t, m, k).Processed, k)
		runs, _ := worklease.TerminalRuns(m, k)
		assert.Equal(t, [][2]int64{{0, hw}}, runs, k)
	}
}

// An offset queued below hw, which LIFO and best-effort ordering can leave
// there, is still work to do: it is not processed, and it is granted when
// its turn comes.
func TestMonotonicQueuedBelowHighWater(t *testing.T) {
	t.Parallel()
	t.Run("LIFO", func(t *testing.T) {
		t.Parallel()
		m, _ := newManager(t, worklease.WithMonotonicOffsets(), worklease.WithOrdering(worklease.LIFO))
		first := acquire(t, m, "A", 10, worklease.Acquired)
		acquire(t, m, "A", 11, worklease.Enqueued)
		acquire(t, m, "A", 12, worklease.Enqueued)
		sres, err := m.Succeed("A", first.Token)
		require.NoError(t, err)
		require.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 12}, sres)
		twelve := acquire(t, m, "A", 12, worklease.Acquired)
		sres, err = m.Succeed("A", twelve.Token)
		require.NoError(t, err)
		require.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 11}, sres, "11 is still queued below hw 12")

		assert.False(t, worklease.CountsProcessed(m, "A", 11))
		assert.True(t, worklease.CountsProcessed(m, "A", 9))
		assert.EqualValues(t, 12, inspect(t, m, "A").Processed, "[0, 12] but the queued 11")
		acquire(t, m, "A", 9, worklease.AlreadyProcessed) // never seen, below hw: not an order error
		eleven := acquire(t, m, "A", 11, worklease.Acquired)
		acquire(t, m, "A", 11, worklease.AlreadyAcquired)
		assert.EqualValues(t, 12, inspect(t, m, "A").Processed, "[0, 12] but the leased 11")
		_, err = m.Succeed("A", eleven.Token)
		require.NoError(t, err)
		acquire(t, m, "A", 11, worklease.AlreadyProcessed)
		assert.EqualValues(t, 13, inspect(t, m, "A").Processed)
	})
	t.Run("best effort", func(t *testing.T) {
		t.Parallel()
		m, _ := newManager(t, worklease.WithMonotonicOffsets(), worklease.WithBestEffortOrdering())
		first := acquire(t, m, "A", 5, worklease.Acquired)
		acquire(t, m, "A", 3, worklease.Enqueued)
		acquire(t, m, "A", 8, worklease.Enqueued)
		_, err := m.Succeed("A", first.Token)
		require.NoError(t, err)
		eight := acquire(t, m, "A", 8, worklease.Acquired) // out of turn
		_, err = m.Succeed("A", eight.Token)
		require.NoError(t, err)
		acquire(t, m, "A", 4, worklease.AlreadyProcessed)
		assert.EqualValues(t, 8, inspect(t, m, "A").Processed, "[0, 8] but the queued 3")
		acquire(t, m, "A", 3, worklease.Acquired)
	})
	t.Run("killed while queued", func(t *testing.T) {
		t.Parallel()
		m, _ := newManager(t, worklease.WithMonotonicOffsets(), worklease.WithOrdering(worklease.LIFO))
		first := acquire(t, m, "A", 1, worklease.Acquired)
		acquire(t, m, "A", 2, worklease.Enqueued)
		acquire(t, m, "A", 3, worklease.Enqueued)
		_, err := m.Succeed("A", first.Token)
		require.NoError(t, err)
		three := acquire(t, m, "A", 3, worklease.Acquired)
		_, err = m.Succeed("A", three.Token)
		require.NoError(t, err)
		h, err := m.Kill("A", 2, "poison")
		require.NoError(t, err, "queued, so not processed")
		assert.Equal(t, worklease.Head{}, h)
		acquire(t, m, "A", 2, worklease.AlreadyFailed)
	})
}

// Failed offsets below hw stay failed, and Redrive makes one work to do
// again, processed only once it succeeds.
func TestMonotonicFailedBelowHighWater(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, worklease.WithMonotonicOffsets(), worklease.WithMaxRetries(0))
	one := acquire(t, m, "A", 1, worklease.Acquired)
	fres, err := m.Fail("A", one.Token, errors.New("boom"))
	require.NoError(t, err)
	require.Equal(t, worklease.GiveUpNoBacklog, fres.Status)
	acquire(t, m, "A", 0, worklease.AlreadyProcessed) // hw is 1: a give-up is terminal
	process(t, m, "A", 3)

	acquire(t, m, "A", 1, worklease.AlreadyFailed)
	acquire(t, m, "A", 2, worklease.AlreadyProcessed)
	info := inspect(t, m, "A")
	assert.EqualValues(t, 3, info.Processed, "[0, 3] but the failed 1")
	assert.EqualValues(t, 1, info.Failed)

	_, err = m.Kill("A", 1, "again")
	require.NoError(t, err, "killing a failed offset changes nothing")
	_, err = m.Kill("A", 2, "poison")
	require.ErrorIs(t, err, worklease.ErrAlreadyProcessed, "2 counts as processed")

	h, err := m.Redrive("A", 1)
	require.NoError(t, err)
	require.Equal(t, worklease.Head{Next: 1, HasNext: true}, h)
	assert.False(t, worklease.CountsProcessed(m, "A", 1), "redriven: queued, not processed")
	info = inspect(t, m, "A")
	assert.EqualValues(t, 3, info.Processed)
	assert.Zero(t, info.Failed)
	process(t, m, "A", 1)
	acquire(t, m, "A", 1, worklease.AlreadyProcessed)
	assert.EqualValues(t, 4, inspect(t, m, "A").Processed)

	// Killing an offset above hw that the domain has not seen is refused;
	// killing one in flight raises hw to it.
	_, err = m.Kill("A", 10, "poison")
	require.ErrorIs(t, err, worklease.ErrOffsetAhead)
	acquire(t, m, "A", 10, worklease.Acquired)
	_, err = m.Kill("A", 10, "poison")
	require.NoError(t, err)
	acquire(t, m, "A", 10, worklease.AlreadyFailed)
	acquire(t, m, "A", 7, worklease.AlreadyProcessed)
	assert.EqualValues(t, 10, inspect(t, m, "A").Processed, "[0, 10] but the failed 10")
}

// However sparse the offsets, a domain keeps one run: memory per domain is
// constant. Without the option, every sparse offset is a run of its own.
func TestMonotonicMemoryIsConstant(t *testing.T) {
	t.Parallel()
	n := int64(1_000_000)
	if testing.Short() {
		n = 50_000
	}
	const every = 7
	for _, monotonic := range []bool{true, false} {
		t.Run(fmt.Sprint("monotonic=", monotonic), func(t *testing.T) {
			t.Parallel()
			var opts []worklease.Option
			if monotonic {
				opts = append(opts, worklease.WithMonotonicOffsets())
			}
			m, err := worklease.New(opts...)
			require.NoError(t, err)
			for i := range n {
				res, err := m.TryAcquire("A", i*every)
				if err != nil || res.Status != worklease.Acquired {
					t.Fatalf("TryAcquire(%d) = %v, %v", i*every, res.Status, err)
				}
				if _, err := m.Succeed("A", res.Token); err != nil {
					t.Fatal(err)
				}
				if !monotonic && i == 1000 {
					break // enough to show the difference
				}
			}
			runs, _ := worklease.TerminalRuns(m, "A")
			if !monotonic {
				require.Len(t, runs, 1001, "one run per sparse offset")
				return
			}
			require.Equal(t, [][2]int64{{0, (n - 1) * every}}, runs)
			require.EqualValues(t, (n-1)*every+1, inspect(t, m, "A").Processed)
			require.NoError(t, worklease.CheckInvariants(m))
		})
	}
}

// A journaled monotonic Manager restarts to the state it had, from its
// records alone or from a snapshot and records, including offsets that were
// queued, in flight and failed below hw, and leases that ended and put
// their offset back below hw.
func TestMonotonicJournalRestart(t *testing.T) {
	t.Parallel()
	for _, snapshot := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshot=", snapshot), func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(epoch)
			opts := []worklease.Option{
				worklease.WithMonotonicOffsets(), worklease.WithOrdering(worklease.LIFO),
				worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(1), worklease.WithClock(clk),
			}
			j := &memjournal.Journal{}
			m, err := worklease.New(append(opts, worklease.WithJournal(j))...)
			require.NoError(t, err)

			// hw 9; 2, 3, 4 and 5 queued below it.
			first := acquire(t, m, "A", 1, worklease.Acquired)
			for _, off := range []int64{2, 3, 4, 5, 9} {
				acquire(t, m, "A", off, worklease.Enqueued)
			}
			_, err = m.Succeed("A", first.Token)
			require.NoError(t, err)
			nine := acquire(t, m, "A", 9, worklease.Acquired)
			_, err = m.Succeed("A", nine.Token)
			require.NoError(t, err)
			// 5 expires and goes back to the backlog; then expires again,
			// on its last attempt, and is dead-lettered.
			acquire(t, m, "A", 5, worklease.Acquired)
			clk.Advance(time.Minute)
			_, err = m.Reap()
			require.NoError(t, err)
			acquire(t, m, "A", 5, worklease.Acquired)
			clk.Advance(time.Minute)
			_, err = m.Reap()
			require.NoError(t, err)
			acquire(t, m, "A", 5, worklease.AlreadyFailed)
			// 4 is force-released; then killed in flight.
			acquire(t, m, "A", 4, worklease.Acquired)
			_, err = m.ForceRelease("A")
			require.NoError(t, err)
			acquire(t, m, "A", 4, worklease.Acquired)
			_, err = m.Kill("A", 4, "poison")
			require.NoError(t, err)
			// 3 is in flight, 2 queued.
			acquire(t, m, "A", 3, worklease.Acquired)
			if snapshot {
				require.NoError(t, m.Snapshot())
			}
			acquire(t, m, "B", 40, worklease.Acquired) // a record after the snapshot

			before := dumpMonotonic(t, m, "A", 12)
			require.Equal(t, monotonicDump{
				Info: worklease.DomainInfo{Leased: true, Lease: before.Info.Lease, Backlog: []int64{2}, Processed: 6, Failed: 2},
				Runs: [][2]int64{{0, 9}}, Failed: []int64{4, 5},
				Counts: []bool{true, true, false, false, false, false, true, true, true, true, false, false},
			}, before)
			require.NoError(t, m.Close())

			m, err = worklease.New(append(opts, worklease.WithJournal(j.Reopen()))...)
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			require.NoError(t, worklease.CheckInvariants(m))
			require.Equal(t, before, dumpMonotonic(t, m, "A", 12))
			acquire(t, m, "A", 7, worklease.AlreadyProcessed)
			acquire(t, m, "B", 39, worklease.Enqueued) // B's hw is not raised by A's
		})
	}
}

// monotonicDump is what a monotonic Manager holds for one domain, with
// whether each offset below a bound counts as processed.
type monotonicDump struct {
	Info   worklease.DomainInfo
	Runs   [][2]int64
	Failed []int64
	Counts []bool
}

func dumpMonotonic(t *testing.T, m *worklease.Manager, domain string, below int64) monotonicDump {
	t.Helper()
	d := monotonicDump{Info: inspect(t, m, domain)}
	d.Runs, d.Failed = worklease.TerminalRuns(m, domain)
	for off := range below {
		d.Counts = append(d.Counts, worklease.CountsProcessed(m, domain, off))
	}
	return d
}

// Switching the option off: the journal says it was written with the
// option, so its records and snapshot replay under the watermark rule, and
// New then keeps every offset that counted as processed processed, around
// the failed, queued and leased ones below hw. The Manager records the
// switch with its first record, so that later restarts, with the option
// or without, replay to the state it had.
func TestMonotonicJournalSwitchedOff(t *testing.T) {
	t.Parallel()
	// write journals sparse offsets with the option: 3 and 8 processed, 5
	// failed, then whatever extra does; and snapshots if asked.
	write := func(t *testing.T, snapshot bool, extra func(m *worklease.Manager)) *memjournal.Journal {
		j := &memjournal.Journal{}
		m, err := worklease.New(worklease.WithJournal(j), worklease.WithMonotonicOffsets())
		require.NoError(t, err)
		process(t, m, "A", 3)
		acquire(t, m, "A", 5, worklease.Acquired)
		_, err = m.Kill("A", 5, "poison")
		require.NoError(t, err)
		process(t, m, "A", 8)
		if extra != nil {
			extra(m)
		}
		if snapshot {
			require.NoError(t, m.Snapshot())
		}
		require.NoError(t, m.Close())
		return j
	}
	for _, snapshot := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshot=", snapshot), func(t *testing.T) {
			t.Parallel()
			j := write(t, snapshot, nil)
			m, err := worklease.New(worklease.WithJournal(j.Reopen()))
			require.NoError(t, err)
			processed, failed := worklease.Terminal(m, "A")
			assert.Equal(t, []int64{0, 1, 2, 3, 4, 6, 7, 8}, processed, "what counted as processed")
			assert.Equal(t, []int64{5}, failed)
			assert.EqualValues(t, 8, inspect(t, m, "A").Processed)
			acquire(t, m, "A", 4, worklease.AlreadyProcessed)
			process(t, m, "A", 12)
			acquire(t, m, "A", 10, worklease.Acquired) // the exact rule from here on
			want := dumpMonotonic(t, m, "A", 14)
			require.NoError(t, m.Close())

			m, err = worklease.New(worklease.WithJournal(j.Reopen()))
			require.NoError(t, err)
			require.Equal(t, want, dumpMonotonic(t, m, "A", 14), "replayed across the switch")
			require.NoError(t, m.Close())

			// And back on: hw is 12 again.
			m, err = worklease.New(worklease.WithJournal(j.Reopen()), worklease.WithMonotonicOffsets())
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			runs, failed := worklease.TerminalRuns(m, "A")
			assert.Equal(t, [][2]int64{{0, 12}}, runs)
			assert.Equal(t, []int64{5}, failed)
			assert.EqualValues(t, 11, inspect(t, m, "A").Processed, "[0, 12] but the failed 5 and the leased 10")
			acquire(t, m, "A", 11, worklease.AlreadyProcessed)
		})
	}
	t.Run("an offset queued and one leased below hw", func(t *testing.T) {
		t.Parallel()
		j := &memjournal.Journal{}
		m, err := worklease.New(worklease.WithJournal(j), worklease.WithMonotonicOffsets(), worklease.WithOrdering(worklease.LIFO))
		require.NoError(t, err)
		first := acquire(t, m, "A", 1, worklease.Acquired)
		acquire(t, m, "A", 2, worklease.Enqueued)
		acquire(t, m, "A", 4, worklease.Enqueued)
		acquire(t, m, "A", 6, worklease.Enqueued)
		_, err = m.Succeed("A", first.Token)
		require.NoError(t, err)
		process(t, m, "A", 6) // hw 6, 2 and 4 queued
		acquire(t, m, "A", 4, worklease.Acquired)
		require.NoError(t, m.Snapshot())
		require.NoError(t, m.Close())
		m, err = worklease.New(worklease.WithJournal(j.Reopen()))
		require.NoError(t, err)
		defer func() { require.NoError(t, m.Close()) }()
		processed, _ := worklease.Terminal(m, "A")
		assert.Equal(t, []int64{0, 1, 3, 5, 6}, processed)
		info := inspect(t, m, "A")
		assert.Equal(t, []int64{2}, info.Backlog)
		assert.True(t, info.Leased)
		assert.EqualValues(t, 4, info.Lease.Offset)
	})
}

// Switching the option on: the journal says it was written without the
// option, so its records replay under the exact rule, whatever order their
// offsets came in, and New then raises each domain's hw to its highest
// processed or failed offset.
func TestMonotonicJournalSwitchedOn(t *testing.T) {
	t.Parallel()
	t.Run("increasing records", func(t *testing.T) {
		t.Parallel()
		j := &memjournal.Journal{}
		m, err := worklease.New(worklease.WithJournal(j))
		require.NoError(t, err)
		process(t, m, "A", 3)
		process(t, m, "A", 8)
		require.NoError(t, m.Close())
		m, err = worklease.New(worklease.WithJournal(j.Reopen()), worklease.WithMonotonicOffsets())
		require.NoError(t, err)
		defer func() { require.NoError(t, m.Close()) }()
		acquire(t, m, "A", 4, worklease.AlreadyProcessed)
		assert.EqualValues(t, 9, inspect(t, m, "A").Processed)
	})
	for _, snapshot := range []bool{false, true} {
		t.Run(fmt.Sprint("out-of-order records, snapshot=", snapshot), func(t *testing.T) {
			t.Parallel()
			j := &memjournal.Journal{}
			m, err := worklease.New(worklease.WithJournal(j), worklease.WithMaxRetries(0))
			require.NoError(t, err)
			process(t, m, "A", 8)
			process(t, m, "A", 3) // below 8: fine without the option
			seven := acquire(t, m, "A", 7, worklease.Acquired)
			_, err = m.Fail("A", seven.Token, errors.New("boom"))
			require.NoError(t, err)
			_, err = m.Kill("A", 12, "poison")
			require.NoError(t, err)
			if snapshot {
				require.NoError(t, m.Snapshot())
			}
			require.NoError(t, m.Close())

			m, err = worklease.New(worklease.WithJournal(j.Reopen()), worklease.WithMonotonicOffsets())
			require.NoError(t, err)
			check := func(m *worklease.Manager) {
				t.Helper()
				runs, failed := worklease.TerminalRuns(m, "A")
				assert.Equal(t, [][2]int64{{0, 12}}, runs, "hw is the highest processed or failed offset")
				assert.Equal(t, []int64{7, 12}, failed)
				acquire(t, m, "A", 5, worklease.AlreadyProcessed)
				acquire(t, m, "A", 7, worklease.AlreadyFailed)
				assert.EqualValues(t, 11, inspect(t, m, "A").Processed)
			}
			check(m)
			process(t, m, "B", 1) // a record: the switch is journaled
			require.NoError(t, m.Close())
			m, err = worklease.New(worklease.WithJournal(j.Reopen()), worklease.WithMonotonicOffsets())
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			check(m)
		})
	}
}

// The journal records its setting once, with the first record after New,
// and again only when a Manager with the other setting opens it. A Manager
// that journals nothing, such as one on a read-only log, records nothing.
func TestJournalRecordsItsSetting(t *testing.T) {
	t.Parallel()
	settings := func(j *memjournal.Journal) []bool {
		_, recs := j.Records()
		var out []bool
		for _, r := range recs {
			if r.Kind == worklease.RecordSettings {
				out = append(out, r.Monotonic)
			}
		}
		return out
	}
	j := &memjournal.Journal{}
	open := func(opts ...worklease.Option) *worklease.Manager {
		m, err := worklease.New(append(opts, worklease.WithJournal(j.Reopen()))...)
		require.NoError(t, err)
		return m
	}
	m := open()
	require.NoError(t, m.Close())
	assert.Empty(t, settings(j), "nothing journaled, nothing said")
	m = open()
	process(t, m, "A", 1)
	process(t, m, "A", 2)
	require.NoError(t, m.Close())
	assert.Equal(t, []bool{false}, settings(j))
	m = open()
	process(t, m, "A", 3)
	require.NoError(t, m.Close())
	assert.Equal(t, []bool{false}, settings(j), "said already")
	m = open(worklease.WithMonotonicOffsets())
	process(t, m, "A", 5)
	require.NoError(t, m.Close())
	assert.Equal(t, []bool{false, true}, settings(j))
	m = open(worklease.WithMonotonicOffsets())
	require.NoError(t, m.Snapshot())
	process(t, m, "A", 6)
	require.NoError(t, m.Close())
	assert.Empty(t, settings(j), "the snapshot says it")
	m = open()
	defer func() { require.NoError(t, m.Close()) }()
	acquire(t, m, "A", 4, worklease.AlreadyProcessed) // under hw 6 when the option was on
	assert.Empty(t, settings(j), "no record yet")
	acquire(t, m, "A", 7, worklease.Acquired)
	assert.Equal(t, []bool{false}, settings(j))
}
