package wal

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// A crashRun is a workload run against a memFS, with what it was promised.
type crashRun struct {
	fs       *memFS
	opts     []Option
	payload  map[uint64]string // every appended record's payload, by sequence number
	kind     map[uint64]uint8  // and kind
	durable  map[uint64]int    // for each record, the operation count once the log promised it durable
	written  map[uint64]int    // for each record, the operation count once it was known written to the operating system
	snapshot map[uint64]int    // for each snapshot written, the operation count once WriteSnapshot returned
}

func newCrashRun(opts ...Option) *crashRun {
	return &crashRun{
		fs:       newMemFS(),
		opts:     append([]Option{WithSegmentSize(MinSegmentSize)}, opts...),
		payload:  map[uint64]string{},
		kind:     map[uint64]uint8{},
		durable:  map[uint64]int{},
		written:  map[uint64]int{},
		snapshot: map[uint64]int{},
	}
}

// open opens the run's log with its options and then extra.
func (r *crashRun) open(t testing.TB, extra ...Option) *Log {
	t.Helper()
	l, err := openMem(r.fs, append(slices.Clone(r.opts), extra...)...)
	require.NoError(t, err)
	return l
}

// promise records that every record up to seq is durable from now on, and
// so written too.
func (r *crashRun) promise(seq uint64) {
	r.promiseWritten(seq)
	op := r.fs.opCount()
	for s := uint64(1); s <= seq; s++ {
		if _, ok := r.durable[s]; !ok {
			r.durable[s] = op
		}
	}
}

// promiseWritten records that every record up to seq is written to the
// operating system from now on: a crash of the process keeps it.
func (r *crashRun) promiseWritten(seq uint64) {
	op := r.fs.opCount()
	for s := uint64(1); s <= seq; s++ {
		if _, ok := r.written[s]; !ok {
			r.written[s] = op
		}
	}
}

func snapshotFor(seq uint64) string { return fmt.Sprintf("state through %d", seq) }

func (r *crashRun) writeSnapshot(t testing.TB, l *Log, seq uint64) {
	t.Helper()
	require.NoError(t, l.WriteSnapshot(seq, func(w io.Writer) error {
		_, err := io.WriteString(w, snapshotFor(seq))
		return err
	}))
	r.snapshot[seq] = r.fs.opCount()
	r.promise(seq) // WriteSnapshot syncs what it covers, whatever the mode
}

// check crashes the run after each of its operations, in each crash mode,
// reopens the directory and checks what it finds: every record promised
// durable before the crash (and, where the crash keeps every write, every
// record known written), in order, and nothing that was not appended.
func (r *crashRun) check(t *testing.T, modes ...crashMode) {
	ops := r.fs.ops()
	step := 1
	if testing.Short() {
		step = 3
	}
	for n := 0; n <= len(ops); n += step {
		r.checkDoubleCrash(t, n, ops)
		for _, mode := range modes {
			crashed := r.fs.crashAt(n, mode, uint64(n))
			what := fmt.Sprintf("crash after %d of %d operations (%v)", n, len(ops), mode)
			if n > 0 {
				what += fmt.Sprintf(", the last %v", ops[n-1])
			}
			l, err := openMem(crashed, r.opts...)
			require.NoError(t, err, what)
			got, err := tryReplay(l)
			require.NoError(t, err, what)
			require.NoError(t, l.Close(), what)
			r.verify(t, n, got, mode == crashKeepAll, what)

			// Recovery is idempotent: a second Open repairs nothing.
			l, err = openMem(crashed, r.opts...)
			require.NoError(t, err, what)
			require.Nil(t, l.Recovery().Torn, what)
			again, err := tryReplay(l)
			require.NoError(t, err, what)
			require.Equal(t, got, again, what)
			require.NoError(t, l.Close(), what)
		}
	}
}

// checkDoubleCrash crashes the process after n operations, reopens and
// replays, and checks what it finds; then it crashes the machine before
// anything else happens: what the first replay returned must survive, since
// the caller may have acted on it.
func (r *crashRun) checkDoubleCrash(t *testing.T, n int, ops []memOp) {
	what := fmt.Sprintf("process crash after %d of %d operations, then a machine crash", n, len(ops))
	proc := r.fs.processCrashAt(n)
	l, err := openMem(proc, r.opts...)
	require.NoError(t, err, what)
	first, err := tryReplay(l)
	require.NoError(t, err, what)
	r.verify(t, n, first, true, what)
	machine := proc.crash(crashDropAll, 0)
	require.NoError(t, l.Close(), what)

	l, err = openMem(machine, r.opts...)
	require.NoError(t, err, what)
	second, err := tryReplay(l)
	require.NoError(t, err, what)
	require.NoError(t, l.Close(), what)
	require.Equal(t, first.SnapSeq, second.SnapSeq, what)
	require.GreaterOrEqual(t, len(second.Records), len(first.Records), what)
	require.Equal(t, first.Records, second.Records[:len(first.Records)], what)
}

// verify checks what a crash after n operations left: records in order,
// each one appended, every one promised durable by then, and if keptWrites
// (the crash kept every write, as a crash of the process does) every one
// known written by then.
func (r *crashRun) verify(t *testing.T, n int, got ireplayed, keptWrites bool, what string) {
	if got.SnapSeq > 0 {
		_, written := r.snapshot[got.SnapSeq]
		require.True(t, written, "%s: snapshot %d was never written", what, got.SnapSeq)
		require.Equal(t, snapshotFor(got.SnapSeq), got.SnapData, what)
	}
	top := got.SnapSeq
	for i, rec := range got.Records {
		require.Equal(t, got.SnapSeq+uint64(i)+1, rec.Seq, "%s: records in order, no gaps", what)
		p, appended := r.payload[rec.Seq]
		require.True(t, appended, "%s: record %d was never appended", what, rec.Seq)
		require.Equal(t, irec{rec.Seq, r.kind[rec.Seq], p}, rec, what)
		top = rec.Seq
	}
	for seq, op := range r.durable {
		if op <= n {
			require.LessOrEqual(t, seq, top, "%s: record %d was promised durable at operation %d", what, seq, op)
		}
	}
	if keptWrites {
		for seq, op := range r.written {
			if op <= n {
				require.LessOrEqual(t, seq, top, "%s: record %d was written at operation %d", what, seq, op)
			}
		}
	}
	for seq, op := range r.snapshot {
		if op <= n {
			require.GreaterOrEqual(t, got.SnapSeq, seq, "%s: snapshot %d was written at operation %d", what, seq, op)
		}
	}
}

// TestCrash runs a deterministic workload (batches of appends, of raw bytes
// and of worklease records, each closed by a Wait; segment rotations; two snapshots that remove segments; Close) in
// each sync mode, then crashes it after every file-system operation: dropping
// everything unsynced, keeping everything, keeping a random prefix of the
// unsynced writes and directory changes, and keeping a random subset of the
// unsynced writes. Every reopen must find every record the mode promised
// durable before the crash, in order, with nothing invented; a crash that
// keeps every write (of the machine, keeping all, or of the process) must
// find every record written before it too: under SyncInterval every record
// Wait acknowledged, under SyncNone every record up to the last tick.
//
// The workload runs in a synctest bubble: once synctest.Wait returns after a
// tick, the sync goroutine is blocked again, waiting for the next one, and
// has done all the tick's work, so the file operations are deterministic.
func TestCrash(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncAlways, SyncInterval(time.Hour), SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			// The reopens after a crash run outside the bubble, with a
			// ticker that never ticks.
			idle, _, _ := manualTicker()
			r := newCrashRun(WithSyncMode(mode), idle)
			synctest.Test(t, func(t *testing.T) {
				tickOpt, tick, _ := manualTicker()
				l := r.open(t, tickOpt)
				t.Cleanup(func() { _ = l.Close() }) // should the test fail: a goroutine must not outlive the bubble
				rng := rand.New(rand.NewPCG(7, 11))
				var next, snap uint64 = 1, 0
				bufferedAtTick := 0 // SyncNone's ticks that found records buffered, not yet written
				for round := range 40 {
					for range 1 + rng.IntN(4) {
						var seq uint64
						var err error
						if rng.IntN(2) == 0 {
							r.payload[next] = fmt.Sprintf("record %d %s", next, strings.Repeat("p", rng.IntN(50)))
							r.kind[next] = uint8(1 + rng.IntN(int(MaxKind)))
							seq, err = l.Append(r.kind[next], []byte(r.payload[next]))
						} else {
							// A Manager's record, encoded into the buffer.
							rec := testRecord(int(next))
							rec.Cause = strings.Repeat("p", rng.IntN(50))
							r.payload[next], r.kind[next] = binaryOf(t, rec), RecordKind
							seq, err = l.AppendRecord(rec)
						}
						require.NoError(t, err)
						require.Equal(t, next, seq)
						next++
					}
					ops := r.fs.opCount()
					require.NoError(t, l.Wait(next-1))
					switch mode {
					case SyncAlways:
						r.promise(next - 1)
					case SyncInterval(time.Hour):
						r.promiseWritten(next - 1)
						if round%5 == 4 {
							tick <- time.Time{}
							synctest.Wait()
							r.promise(next - 1)
						}
					case SyncNone:
						require.Equal(t, ops, r.fs.opCount(), "Wait does no I/O")
						if round%3 == 2 {
							l.mu.Lock()
							if len(l.buf) > 0 {
								bufferedAtTick++
							}
							l.mu.Unlock()
							tick <- time.Time{}
							synctest.Wait()
							r.promiseWritten(next - 1)
						}
					}
					// The third snapshot follows the second so closely
					// that it has no segment to remove.
					if round == 12 || round == 27 || round == 28 {
						snap = max(snap, next-1-uint64(rng.IntN(3)))
						r.writeSnapshot(t, l, snap)
					}
				}
				require.NoError(t, l.Close())
				r.promise(next - 1)
				if mode == SyncNone {
					require.Positive(t, bufferedAtTick, "the write-behind wrote buffered records")
				}
			})
			r.check(t, crashDropAll, crashKeepAll, crashRandom, crashReorder)
		})
	}
}

// TestCrashConcurrent runs appends from eight goroutines, with a snapshot
// between two phases, and crashes it after every operation.
func TestCrashConcurrent(t *testing.T) {
	t.Parallel()
	r := newCrashRun()
	l := r.open(t)
	var mu sync.Mutex // guards r.payload, r.kind and r.durable
	phase := func(name string) {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 8 {
					p := fmt.Sprintf("%s g%d r%d", name, g, i)
					seq, err := l.Append(uint8(g+1), []byte(p))
					if err != nil {
						panic(err)
					}
					mu.Lock()
					r.payload[seq], r.kind[seq] = p, uint8(g+1)
					mu.Unlock()
					if err := l.Wait(seq); err != nil {
						panic(err)
					}
					mu.Lock()
					if _, ok := r.durable[seq]; !ok {
						r.durable[seq] = r.fs.opCount()
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	phase("one")
	r.writeSnapshot(t, l, l.Durable()-3)
	phase("two")
	require.NoError(t, l.Close())
	r.promise(l.Stats().LastSeq)
	r.check(t, crashDropAll, crashRandom, crashReorder)
}
