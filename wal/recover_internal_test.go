package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// intactBatches returns how many of the batches of the original segment orig
// are whole in damaged.
func intactBatches(ends []batchEnd, orig, damaged []byte) int {
	n := 0
	for _, e := range ends {
		if e.end <= int64(len(damaged)) && bytes.Equal(orig[:e.end], damaged[:e.end]) {
			n++
		}
	}
	return n
}

// checkRecovered opens fsys and checks that it recovers exactly the first n
// batches, then that a second Open finds nothing left to repair.
func checkRecovered(t *testing.T, fsys *memFS, batches [][]string, n int) *TornTail {
	t.Helper()
	l, err := openMem(fsys)
	require.NoError(t, err)
	torn := l.Recovery().Torn
	want := recordsOf(batches[:n])
	got := replayMem(t, l)
	require.Equal(t, want, got.Records)
	require.NoError(t, l.Close())

	l, err = openMem(fsys)
	require.NoError(t, err)
	require.Nil(t, l.Recovery().Torn, "the repair is durable")
	require.Equal(t, want, replayMem(t, l).Records)
	require.NoError(t, l.Close())
	require.Zero(t, fsys.openFiles())
	return torn
}

// TestTornTailEveryOffset cuts the segment at every byte offset, alone and
// followed by zeros or garbage, and checks that Open recovers exactly the
// batches committed before the cut and reports the tail it cut.
func TestTornTailEveryOffset(t *testing.T) {
	t.Parallel()
	base, ends := buildLog(t, testBatches)
	seg := base.files(dir)[ends[0].seg]
	require.Equal(t, ends[len(ends)-1].end, int64(len(seg)))
	rng := rand.New(rand.NewPCG(1, 2))
	for cut := int64(segmentHeaderSize); cut <= int64(len(seg)); cut++ {
		tails := map[string][]byte{
			"nothing": nil,
			"zeros":   make([]byte, 1+rng.IntN(100)),
			"garbage": randomBytes(rng, 1+rng.IntN(100)),
		}
		for name, tail := range tails {
			t.Run(fmt.Sprintf("cut=%d/then=%s", cut, name), func(t *testing.T) {
				fsys := base.clone()
				damaged := append(bytes.Clone(seg[:cut]), tail...)
				fsys.setFile(dir, ends[0].seg, damaged)
				// Zeros after a cut inside a commit marker's zero
				// bytes can restore the batch: count what is whole.
				n := intactBatches(ends, seg, damaged)
				torn := checkRecovered(t, fsys, testBatches, n)
				wantOff := int64(segmentHeaderSize)
				if n > 0 {
					wantOff = ends[n-1].end
				}
				if int64(len(damaged)) == wantOff {
					require.Nil(t, torn)
					return
				}
				require.NotNil(t, torn)
				assert.Equal(t, ends[0].seg, torn.File)
				assert.Equal(t, wantOff, torn.Offset)
				assert.Equal(t, int64(len(damaged))-wantOff, torn.Bytes)
				assert.True(t, isRecordError(torn.Reason), "reason %v", torn.Reason)
			})
		}
	}
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestBitFlipEveryByte flips one bit of every byte of the last segment. Damage
// to a batch followed by another batch, which says the damaged bytes had been
// synced, is corruption at the damaged record; damage to the last batch is a
// torn tail.
func TestBitFlipEveryByte(t *testing.T) {
	t.Parallel()
	base, ends := buildLog(t, testBatches)
	seg := base.files(dir)[ends[0].seg]
	starts := frameStarts(t, seg)
	lastStart := ends[len(ends)-2].end
	for p := range int64(len(seg)) {
		t.Run(fmt.Sprintf("byte=%d", p), func(t *testing.T) {
			fsys := base.clone()
			damaged := bytes.Clone(seg)
			damaged[p] ^= 1 << (p % 8)
			fsys.setFile(dir, ends[0].seg, damaged)
			if p >= lastStart {
				checkRecovered(t, fsys, testBatches, len(testBatches)-1)
				return
			}
			_, err := openMem(fsys)
			require.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, ends[0].seg, ce.File)
			if p < segmentHeaderSize {
				assert.Equal(t, int64(0), ce.Offset)
				assert.ErrorIs(t, err, ErrBadHeader)
			} else {
				assert.Equal(t, frameAt(starts, p), ce.Offset)
				assert.True(t, errors.Is(err, ErrInvalidRecord) || errors.Is(err, ErrUnexpectedEOF), "%v", err)
			}
			assert.Equal(t, damaged, fsys.files(dir)[ends[0].seg], "corruption is never truncated")
			assert.Zero(t, fsys.openFiles())
		})
	}
}

// TestBitFlipSealedSegment flips bytes of a segment that is not the last: any
// damage there is corruption, even in its last batch.
func TestBitFlipSealedSegment(t *testing.T) {
	t.Parallel()
	batches := batchPayloads(12, 3, 40)
	base, ends := buildLog(t, batches, WithSegmentSize(MinSegmentSize))
	first := ends[0].seg
	require.NotEqual(t, first, ends[len(ends)-1].seg, "the log needs two segments")
	seg := base.files(dir)[first]
	starts := frameStarts(t, seg)
	step := int64(1)
	if testing.Short() {
		step = 7
	}
	for p := int64(segmentHeaderSize); p < int64(len(seg)); p += step {
		fsys := base.clone()
		fsys.setFile(dir, first, flip(seg, int(p)))
		_, err := openMem(fsys)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce, "byte %d", p)
		assert.Equal(t, first, ce.File)
		assert.Equal(t, frameAt(starts, p), ce.Offset, "byte %d", p)
	}

	// A sealed segment that lost its last commit marker.
	fsys := base.clone()
	fsys.setFile(dir, first, seg[:len(seg)-commitFrameSize])
	_, err := openMem(fsys)
	require.ErrorIs(t, err, ErrUncommitted)
	require.ErrorIs(t, err, ErrCorrupt)
}

// TestTornBatchWithMarker models a crash that persisted the last batch's
// commit marker but not a page in its middle: the marker says the batch was
// not synced when written, so it is a torn tail, not corruption.
func TestTornBatchWithMarker(t *testing.T) {
	t.Parallel()
	batches := [][]string{{"one"}, {"two-aaaaaaaaaaaaaaaaaaaa", "three-aaaaaaaaaaaaaaaaaa", "four-aaaaaaaaaaaaaaaaaaaa"}}
	base, ends := buildLog(t, batches)
	seg := base.files(dir)[ends[0].seg]
	damaged := bytes.Clone(seg)
	copy(damaged[ends[0].end+30:ends[0].end+60], make([]byte, 30))
	fsys := base.clone()
	fsys.setFile(dir, ends[0].seg, damaged)
	torn := checkRecovered(t, fsys, batches, 1)
	require.NotNil(t, torn)
	assert.Equal(t, ends[0].end, torn.Offset)
}

// TestUnsyncedDamageIsTorn damages a batch written under SyncInterval, before
// any fsync, and followed by another: the later batch's marker says the
// damaged bytes were never synced, so a crash may have lost them while
// keeping later pages. It is a torn tail, cut back to the last synced batch.
func TestUnsyncedDamageIsTorn(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	l := mustOpenMem(t, fsys)
	ends := writeBatches(t, l, testBatches[:1]) // synced: SyncAlways
	require.NoError(t, l.Close())
	// Each Wait writes its batch; the interval never ticks, so nothing is
	// fsynced until Close, which writes no batch.
	never, _, _ := manualTicker()
	l = mustOpenMem(t, fsys, WithSyncMode(SyncInterval(time.Hour)), never)
	ends = append(ends, writeBatches(t, l, testBatches[1:])...)
	require.NoError(t, l.Close())

	seg := fsys.files(dir)[ends[0].seg]
	damaged := bytes.Clone(seg)
	copy(damaged[ends[1].end:ends[2].end], make([]byte, ends[2].end-ends[1].end)) // a lost page
	fsys.setFile(dir, ends[0].seg, damaged)
	torn := checkRecovered(t, fsys, testBatches, 2)
	require.NotNil(t, torn)
	assert.Equal(t, ends[1].end, torn.Offset)
	assert.ErrorIs(t, torn.Reason, ErrZeroedRecord)
}

func TestGarbageLengths(t *testing.T) {
	t.Parallel()
	base, ends := buildLog(t, testBatches)
	seg := base.files(dir)[ends[0].seg]
	starts := frameStarts(t, seg)
	tests := []struct {
		name   string
		length uint32
		want   error
	}{
		{"4 GiB", 0xFFFFFFFF, ErrInvalidRecord},
		{"just over the limit", DefaultMaxRecordSize + 1, ErrInvalidRecord},
		{"past the end of the file", uint32(len(seg)), ErrUnexpectedEOF},
		{"one byte", 1, ErrInvalidRecord},
		{"zero", 0, ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// In the first record: corruption, since good batches follow.
			fsys := base.clone()
			damaged := bytes.Clone(seg)
			binary.LittleEndian.PutUint32(damaged[starts[0]:], tt.length)
			fsys.setFile(dir, ends[0].seg, damaged)
			_, err := openMem(fsys)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorIs(t, err, tt.want)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, starts[0], ce.Offset)

			// In the last batch: a torn tail.
			fsys = base.clone()
			damaged = bytes.Clone(seg)
			binary.LittleEndian.PutUint32(damaged[ends[len(ends)-2].end:], tt.length)
			fsys.setFile(dir, ends[0].seg, damaged)
			torn := checkRecovered(t, fsys, testBatches, len(testBatches)-1)
			require.NotNil(t, torn)
			assert.ErrorIs(t, torn.Reason, tt.want)
		})
	}
}

// TestGarbageLengthAllocates checks that a length field claiming almost the
// largest record makes Open allocate nothing near it. It does not run in
// parallel, so that the memory statistics are its own.
func TestGarbageLengthAllocates(t *testing.T) {
	base, ends := buildLog(t, testBatches, WithMaxRecordSize(MaxRecordSizeLimit))
	seg := base.files(dir)[ends[0].seg]
	damaged := bytes.Clone(seg)
	binary.LittleEndian.PutUint32(damaged[ends[len(ends)-2].end:], MaxRecordSizeLimit)
	base.setFile(dir, ends[0].seg, damaged)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l, err := openMem(base, WithMaxRecordSize(MaxRecordSizeLimit))
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "bytes allocated by Open")
}

func TestMissingSegments(t *testing.T) {
	t.Parallel()
	batches := batchPayloads(20, 2, 40)
	base, ends := buildLog(t, batches, WithSegmentSize(MinSegmentSize))
	names := base.fileNames(dir)
	require.GreaterOrEqual(t, len(names), 4, "%v", names)
	require.Equal(t, segmentName(1), names[0])

	t.Run("middle", func(t *testing.T) {
		t.Parallel()
		fsys := base.clone()
		fsys.removeFile(dir, segmentName(2))
		_, err := openMem(fsys)
		require.ErrorIs(t, err, ErrMissingSegment)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, segmentName(3), ce.File)
	})
	t.Run("first, without a snapshot", func(t *testing.T) {
		t.Parallel()
		fsys := base.clone()
		fsys.removeFile(dir, segmentName(1))
		_, err := openMem(fsys)
		require.ErrorIs(t, err, ErrMissingSegment)
		assert.ErrorContains(t, err, "records 1 to")
	})
	t.Run("replaced by another", func(t *testing.T) {
		t.Parallel()
		fsys := base.clone()
		fsys.setFile(dir, segmentName(2), fsys.files(dir)[segmentName(3)])
		_, err := openMem(fsys)
		require.ErrorIs(t, err, ErrBadHeader)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, segmentName(2), ce.File)
	})
	t.Run("snapshot without segments", func(t *testing.T) {
		t.Parallel()
		fsys := base.clone()
		for _, name := range names {
			fsys.removeFile(dir, name)
		}
		fsys.setFile(dir, snapshotName, snapshotBytes(5, "state"))
		_, err := openMem(fsys)
		require.ErrorIs(t, err, ErrMissingSegment)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, snapshotName, ce.File)
	})
	t.Run("gap after the snapshot", func(t *testing.T) {
		t.Parallel()
		fsys := base.clone()
		fsys.setFile(dir, snapshotName, snapshotBytes(ends[1].lastSeq, "state"))
		for _, name := range names[:2] {
			fsys.removeFile(dir, name)
		}
		_, err := openMem(fsys)
		require.ErrorIs(t, err, ErrMissingSegment)
	})
	t.Run("gap covered by the snapshot", func(t *testing.T) {
		t.Parallel()
		fsys := base.clone()
		h := readHeader(t, fsys, names[2])
		fsys.setFile(dir, snapshotName, snapshotBytes(h.firstSeq-1, "state"))
		fsys.removeFile(dir, names[1])
		l := mustOpenMem(t, fsys)
		assert.Equal(t, []string{names[0]}, l.Recovery().Removed, "the covered segment before the gap goes")
		got := replayMem(t, l)
		assert.Equal(t, h.firstSeq-1, got.SnapSeq)
		assert.Equal(t, recordsOf(batches)[h.firstSeq-1:], got.Records)
	})
}

func readHeader(t *testing.T, fsys *memFS, name string) segmentHeader {
	t.Helper()
	h, err := decodeSegmentHeader(fsys.files(dir)[name])
	require.NoError(t, err)
	return h
}

// snapshotBytes returns a valid snapshot file.
func snapshotBytes(seq uint64, data string) []byte {
	var buf memBuffer
	sw := &snapshotWriter{f: &buf, buf: make([]byte, 0, 64)}
	sw.raw(snapshotHeader(seq))
	_, _ = sw.Write([]byte(data))
	_ = sw.finish()
	return buf.b
}

func TestBadSnapshot(t *testing.T) {
	t.Parallel()
	base, _ := buildLog(t, testBatches)
	good := snapshotBytes(3, "state")
	v2 := bytes.Clone(good)
	binary.LittleEndian.PutUint32(v2[4:], 2)
	binary.LittleEndian.PutUint32(v2[len(v2)-4:], crc32c(v2[:len(v2)-4]))
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"flipped", flip(good, 18), ErrCorrupt},
		{"truncated", good[:10], ErrCorrupt},
		{"empty", nil, ErrCorrupt},
		{"future version", v2, ErrUnsupportedVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := base.clone()
			fsys.setFile(dir, snapshotName, tt.data)
			_, err := openMem(fsys)
			require.ErrorIs(t, err, tt.want)
			var ce *CorruptionError
			if errors.As(err, &ce) {
				assert.Equal(t, snapshotName, ce.File)
			}
			assert.Len(t, fsys.fileNames(dir), 2, "nothing is removed")
		})
	}
}

func TestUnsupportedSegmentVersion(t *testing.T) {
	t.Parallel()
	fsys, ends := buildLog(t, testBatches)
	seg := bytes.Clone(fsys.files(dir)[ends[0].seg])
	binary.LittleEndian.PutUint32(seg[4:], 2)
	binary.LittleEndian.PutUint32(seg[28:], crc32c(seg[:28]))
	fsys.setFile(dir, ends[0].seg, seg)
	_, err := openMem(fsys)
	require.ErrorIs(t, err, ErrUnsupportedVersion)
	assert.NotErrorIs(t, err, ErrCorrupt)
	assert.ErrorContains(t, err, ends[0].seg)
}

// TestSnapshotBeyondLog covers a snapshot newer than the log's last record,
// as when damage in the very last batch was cut as a torn tail: the next
// record starts a new segment after the snapshot.
func TestSnapshotBeyondLog(t *testing.T) {
	t.Parallel()
	fsys, ends := buildLog(t, testBatches)
	fsys.setFile(dir, snapshotName, snapshotBytes(ends[len(ends)-1].lastSeq+5, "ahead"))
	l := mustOpenMem(t, fsys)
	want := ends[len(ends)-1].lastSeq + 5
	assert.Equal(t, want, l.Recovery().LastSeq)
	assert.Equal(t, 2, l.Recovery().Segments)
	seq, err := l.Append(1, []byte("next"))
	require.NoError(t, err)
	assert.Equal(t, want+1, seq)
	require.NoError(t, l.Wait(seq))
	require.NoError(t, l.Close())

	l = mustOpenMem(t, fsys)
	assert.Equal(t, []string{ends[0].seg}, l.Recovery().Removed)
	assert.Equal(t, ireplayed{want, "ahead", []irec{{want + 1, 1, "next"}}}, replayMem(t, l))
}

// TestFailedOpenReleases checks that an Open that fails closes its files and
// releases the lock.
func TestFailedOpenReleases(t *testing.T) {
	t.Parallel()
	fsys, ends := buildLog(t, testBatches)
	fsys.setFile(dir, ends[0].seg, flip(fsys.files(dir)[ends[0].seg], 40))
	for range 2 {
		_, err := openMem(fsys)
		require.ErrorIs(t, err, ErrCorrupt, "not ErrLocked: the first Open released the lock")
		assert.Zero(t, fsys.openFiles())
	}
}

// TestOpenSyncsNewParents checks that creating the log's directory fsyncs
// the directory holding each one Open created, so the log outlives a crash.
func TestOpenSyncsNewParents(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	fsys.setFile("/", "unrelated", nil) // "/" exists; "/data" and dir do not
	l := mustOpenMem(t, fsys)
	require.True(t, l.Recovery().Created)
	var synced []string
	for _, op := range fsys.ops() {
		if op.kind == opSyncDir {
			synced = append(synced, op.path)
		}
	}
	assert.Subset(t, synced, []string{"/", "/data", dir})
}
