package wal

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// dir is where the in-memory tests keep their log.
const dir = "/data/journal"

// irec is one replayed record.
type irec struct {
	Seq     uint64
	Kind    uint8
	Payload string
}

// ireplayed is everything Replay hands back.
type ireplayed struct {
	SnapSeq  uint64
	SnapData string
	Records  []irec
}

func openMem(fsys *memFS, opts ...Option) (*Log, error) {
	return Open(dir, append([]Option{withFS(fsys)}, opts...)...)
}

// mustOpenMem opens the log in fsys and closes it when the test ends.
func mustOpenMem(t testing.TB, fsys *memFS, opts ...Option) *Log {
	t.Helper()
	l, err := openMem(fsys, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func replayMem(t testing.TB, l *Log) ireplayed {
	t.Helper()
	r, err := tryReplay(l)
	require.NoError(t, err)
	return r
}

func tryReplay(l *Log) (ireplayed, error) {
	var r ireplayed
	err := l.Replay(func(seq uint64, data []byte) error {
		r.SnapSeq, r.SnapData = seq, string(data)
		return nil
	}, func(seq uint64, kind uint8, payload []byte) error {
		r.Records = append(r.Records, irec{seq, kind, string(payload)})
		return nil
	})
	return r, err
}

// A batchEnd locates the end of one committed batch.
type batchEnd struct {
	seg     string // base name of its segment
	end     int64  // offset just past its commit marker
	lastSeq uint64 // its last record
}

// writeBatches appends each batch's payloads and waits once for the batch,
// so that each becomes one committed batch, and returns where each ends.
func writeBatches(t testing.TB, l *Log, batches [][]string) []batchEnd {
	t.Helper()
	var ends []batchEnd
	for _, b := range batches {
		var last uint64
		for _, p := range b {
			seq, err := l.Append(1, []byte(p))
			require.NoError(t, err)
			last = seq
		}
		require.NoError(t, l.Wait(last))
		l.flush.Lock()
		s := l.flush.segments[len(l.flush.segments)-1]
		l.flush.Unlock()
		ends = append(ends, batchEnd{seg: segmentName(s.id), end: s.size, lastSeq: last})
	}
	return ends
}

// buildLog writes batches into a new log in a new memFS, closes it and
// returns the memFS and where each batch ends.
func buildLog(t testing.TB, batches [][]string, opts ...Option) (*memFS, []batchEnd) {
	t.Helper()
	fsys := newMemFS()
	l, err := openMem(fsys, opts...)
	require.NoError(t, err)
	ends := writeBatches(t, l, batches)
	require.NoError(t, l.Close())
	return fsys, ends
}

// recordsOf lists the records of batches, numbered from 1, with kind 1.
func recordsOf(batches [][]string) []irec {
	var out []irec
	for _, b := range batches {
		for _, p := range b {
			out = append(out, irec{uint64(len(out) + 1), 1, p})
		}
	}
	return out
}

// frameStarts returns the offset of every frame in a segment's bytes.
func frameStarts(t testing.TB, seg []byte) []int64 {
	t.Helper()
	var starts []int64
	for off := segmentHeaderSize; off < len(seg); {
		_, n, err := decodeFrame(seg[off:], MaxRecordSizeLimit)
		require.NoError(t, err)
		starts = append(starts, int64(off))
		off += n
	}
	return starts
}

// frameAt returns the start of the frame holding byte p.
func frameAt(starts []int64, p int64) int64 {
	at := starts[0]
	for _, s := range starts {
		if s <= p {
			at = s
		}
	}
	return at
}

// testBatches is a small log: four batches of one to three records.
var testBatches = [][]string{
	{"alpha", "bravo"},
	{"charlie"},
	{"delta", "echo", "foxtrot"},
	{"golf", "hotel"},
}

// batchPayloads returns n batches of k records each, of about size bytes.
func batchPayloads(n, k, size int) [][]string {
	out := make([][]string, n)
	for i := range out {
		for j := range k {
			p := fmt.Sprintf("b%d-r%d-", i, j)
			for len(p) < size {
				p += "."
			}
			out[i] = append(out[i], p)
		}
	}
	return out
}
