package wal

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/worklease/worklease"
)

// AppendRecord, which encodes a worklease.Record straight into the log's
// buffer, among the raw records of Append.

// testRecord returns a valid worklease.Record that differs with i.
func testRecord(i int) worklease.Record {
	rec := worklease.Record{
		Kind:    worklease.EventAcquired,
		Domain:  fmt.Sprintf("domain-%d", i%3),
		Offset:  int64(i),
		Attempt: i % 4,
		At:      time.Unix(int64(1_700_000_000+i), int64(i)).UTC(),
	}
	if i%5 == 0 {
		rec.Kind, rec.Cause = worklease.EventRetrying, fmt.Sprintf("boom %d", i)
	}
	return rec
}

// binaryOf returns rec's binary form, as a record's payload in the log.
func binaryOf(t testing.TB, rec worklease.Record) string {
	t.Helper()
	b, err := rec.MarshalBinary()
	require.NoError(t, err)
	return string(b)
}

// TestRecordFixedBound checks recordFixedBound, on which MinMaxRecordSize
// rests, against the binary form of a record without the producers' fields
// with every integer at its widest, and of random ones: with its strings,
// it must never be less. A new field in worklease's codec.go would fail
// it, unless it fits in the bound's slack.
func TestRecordFixedBound(t *testing.T) {
	t.Parallel()
	bound := func(rec *worklease.Record) int { return recordFixedBound + len(rec.Domain) + len(rec.Cause) }
	tok, err := worklease.ParseToken("18446744073709551615-ffffffffffffffff-ffffffffffffffff")
	require.NoError(t, err)
	far := time.Unix(math.MinInt64, 999_999_999) // the widest seconds and nanoseconds
	widest := worklease.Record{
		Kind: worklease.EventAcquired, Domain: strings.Repeat("d", 300), Offset: math.MinInt64,
		Attempt: -1, Token: tok, Cause: strings.Repeat("c", 200), At: far, AcquiredAt: far.Add(-time.Nanosecond),
		Retries: -1, ExpiresAt: far, Front: true, Fence: math.MaxUint64,
	}
	assert.LessOrEqual(t, len(binaryOf(t, widest)), bound(&widest))

	rapid.Check(t, func(t *rapid.T) {
		anyTime := func(label string) time.Time {
			if rapid.Bool().Draw(t, label+"Zero") {
				return time.Time{}
			}
			return time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, label), rapid.Int64Range(0, 999_999_999).Draw(t, label+"Nanos"))
		}
		rec := worklease.Record{
			Kind:       worklease.EventKind(rapid.IntRange(1, int(worklease.EventKilled)).Draw(t, "kind")),
			Domain:     rapid.String().Draw(t, "domain"),
			Offset:     rapid.Int64().Draw(t, "offset"),
			Attempt:    rapid.Int().Draw(t, "attempt"),
			Cause:      rapid.String().Draw(t, "cause"),
			At:         anyTime("at"),
			AcquiredAt: anyTime("acquiredAt"),
			Retries:    rapid.Int().Draw(t, "retries"),
			ExpiresAt:  anyTime("expiresAt"),
			Front:      rapid.Bool().Draw(t, "front"),
			Fence:      rapid.Uint64().Draw(t, "fence"),
		}
		b, err := rec.MarshalBinary()
		if err != nil || len(b) > bound(&rec) {
			t.Fatalf("%d bytes (%v), bound %d: %+v", len(b), err, bound(&rec), rec)
		}
	})
}

// TestAppendRecordOrder mixes Append and AppendRecord under SyncNone, with
// write-behind ticks, segment rotations and a snapshot in between: the
// records read back are the ones appended, in sequence order, whichever
// call made them.
func TestAppendRecordOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tickOpt, tick, _ := manualTicker()
		fsys := newMemFS()
		l := mustOpenMem(t, fsys, WithSyncMode(SyncNone), WithSegmentSize(MinSegmentSize), tickOpt)
		var want []irec
		for i := range 300 {
			var seq uint64
			var err error
			switch {
			case i%7 == 3 || i%11 == 0: // raw bytes
				p := fmt.Sprintf("raw %d", i)
				seq, err = l.Append(2, []byte(p))
				want = append(want, irec{seq, 2, p})
			default:
				rec := testRecord(i)
				seq, err = l.AppendRecord(rec)
				want = append(want, irec{seq, RecordKind, binaryOf(t, rec)})
			}
			require.NoError(t, err)
			require.Equal(t, uint64(i+1), seq)
			if i%13 == 12 {
				tick <- time.Time{}
				synctest.Wait()
			}
			if i == 150 {
				require.NoError(t, l.WriteSnapshot(seq-10, func(w io.Writer) error {
					_, err := io.WriteString(w, "state")
					return err
				}))
			}
		}
		assert.Greater(t, l.Stats().Segments, 2, "the log rotated")

		// Replay reads what was written: up to the last tick.
		written := l.Stats().Written
		require.Equal(t, uint64(299), written)
		got := replayMem(t, l)
		require.Equal(t, ireplayed{141, "state", want[141:written]}, got)

		require.NoError(t, l.Close())
		l = mustOpenMem(t, fsys.crash(crashDropAll, 0))
		got = replayMem(t, l)
		require.Equal(t, ireplayed{141, "state", want[141:]}, got, "Close wrote and synced the rest")
	})
}

// TestAppendRecordTooLarge checks that AppendRecord refuses at once,
// changing nothing, a record whose binary form exceeds the maximum record
// size, for a long domain or a long cause, and takes one at the limit
// behind the records buffered: the limit is exact.
func TestAppendRecordTooLarge(t *testing.T) {
	t.Parallel()
	// sized returns testRecord(1) with a domain that makes its binary
	// form n bytes long.
	sized := func(n int) worklease.Record {
		rec := testRecord(1)
		for {
			size := len(binaryOf(t, rec))
			if size == n {
				return rec
			}
			rec.Domain = strings.Repeat("d", len(rec.Domain)+n-size)
		}
	}
	const limit = DefaultMaxRecordSize
	atLimit, overLimit := sized(limit), sized(limit+1)
	longCause := testRecord(2)
	longCause.Cause = strings.Repeat("c", limit)

	for _, mode := range []SyncMode{SyncNone, SyncAlways} {
		fsys := newMemFS()
		tickOpt, _, _ := manualTicker() // never ticks
		l := mustOpenMem(t, fsys, WithSyncMode(mode), tickOpt)
		var want []irec
		appendOK := func(rec worklease.Record) {
			t.Helper()
			seq, err := l.AppendRecord(rec)
			require.NoError(t, err)
			want = append(want, irec{seq, RecordKind, binaryOf(t, rec)})
		}
		appendOK(testRecord(3))
		appendOK(testRecord(4))
		l.mu.Lock()
		buffered := string(l.buf)
		l.mu.Unlock()
		for name, rec := range map[string]worklease.Record{"domain": overLimit, "cause": longCause} {
			_, err := l.AppendRecord(rec)
			require.ErrorIs(t, err, ErrRecordTooLarge, name)
			l.mu.Lock()
			assert.Equal(t, buffered, string(l.buf), "%s: the buffer is as it was", name)
			assert.Equal(t, 2, l.bufCount, "%s: nothing buffered", name)
			l.mu.Unlock()
			assert.Equal(t, uint64(2), l.Stats().LastSeq, "%s: nothing appended", name)
		}
		appendOK(atLimit) // behind the two buffered records
		appendOK(testRecord(5))
		require.NoError(t, l.Close())
		l = mustOpenMem(t, fsys.crash(crashDropAll, 0))
		assert.Equal(t, want, replayMem(t, l).Records, "%v", mode)
	}
}

// TestAppendRecordConcurrent appends from goroutines that mix Append and
// AppendRecord under SyncNone, with the real write-behind goroutine, and
// enough records that it is woken early and that callers reach
// flushThreshold: every record is read back after Close under its sequence
// number, with no gaps.
func TestAppendRecordConcurrent(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	l, err := openMem(fsys, WithSyncMode(SyncNone))
	require.NoError(t, err)
	perG := 1000
	if testing.Short() {
		perG = 300
	}
	var mu sync.Mutex // guards want
	want := map[uint64]irec{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range perG {
				var r irec
				var err error
				if g%2 == 0 {
					p := fmt.Sprintf("raw g%d r%d %s", g, i, bytes.Repeat([]byte("x"), i%200))
					r.Kind, r.Payload = 2, p
					r.Seq, err = l.Append(2, []byte(p))
				} else {
					rec := testRecord(g*perG + i)
					r.Kind, r.Payload = RecordKind, binaryOf(t, rec)
					r.Seq, err = l.AppendRecord(rec)
				}
				if err == nil && i%100 == 0 {
					err = l.Wait(r.Seq)
				}
				if err != nil {
					panic(err)
				}
				mu.Lock()
				want[r.Seq] = r
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Close())

	l = mustOpenMem(t, fsys.crash(crashDropAll, 0))
	got := replayMem(t, l).Records
	require.Len(t, got, 8*perG)
	for i, r := range got {
		require.Equal(t, uint64(i+1), r.Seq)
		require.Equal(t, want[r.Seq], r)
	}
}
