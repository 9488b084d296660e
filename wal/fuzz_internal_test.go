package wal

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// fuzzNames are the file names FuzzOpen puts in the directory: the log's own,
// leftovers, and a stranger.
var fuzzNames = []string{
	segmentName(1), segmentName(2), segmentName(3), segmentName(4),
	snapshotName, snapshotName + tempSuffix, segmentName(5) + tempSuffix, "notes.txt",
}

// encodeDir encodes files, by index into fuzzNames, as FuzzOpen decodes them.
func encodeDir(files map[int][]byte) []byte {
	var b []byte
	for i := range fuzzNames {
		if data, ok := files[i]; ok {
			b = append(b, byte(i))
			b = binary.LittleEndian.AppendUint16(b, uint16(len(data)))
			b = append(b, data...)
		}
	}
	return b
}

// decodeDir writes the files that b describes into a new memFS: a name
// index, a 16-bit length, the content, and again. A length past the end takes
// what is left.
func decodeDir(b []byte) *memFS {
	fsys := newMemFS()
	fsys.setFile(dir, "LOCK", nil)
	for len(b) >= 3 {
		name := fuzzNames[int(b[0])%len(fuzzNames)]
		n := min(int(binary.LittleEndian.Uint16(b[1:])), len(b)-3)
		fsys.setFile(dir, name, b[3:3+n])
		b = b[3+n:]
	}
	return fsys
}

// fuzzSeeds returns directories written by the log itself: a fresh one, one
// with several segments, and one with a snapshot.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	dump := func(fsys *memFS) {
		files := map[int][]byte{}
		for name, data := range fsys.files(dir) {
			for i, n := range fuzzNames {
				if n == name {
					files[i] = data
				}
			}
		}
		seeds = append(seeds, encodeDir(files))
	}
	fsys, _ := buildLog(f, testBatches)
	dump(fsys)
	fsys, _ = buildLog(f, batchPayloads(6, 3, 60), WithSegmentSize(MinSegmentSize))
	dump(fsys)
	fsys, _ = buildLog(f, batchPayloads(6, 3, 60), WithSegmentSize(MinSegmentSize))
	l, err := openMem(fsys, WithSegmentSize(MinSegmentSize))
	if err != nil {
		f.Fatal(err)
	}
	if err := l.WriteSnapshot(9, func(w io.Writer) error {
		_, err := w.Write([]byte("state"))
		return err
	}); err != nil {
		f.Fatal(err)
	}
	writeBatches(f, l, [][]string{{"after the snapshot"}})
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	dump(fsys)
	return seeds
}

// FuzzOpen opens a directory of arbitrary files. Open must never panic: it
// fails with a classified error and leaves nothing open, or it succeeds, and
// then Replay succeeds, the log accepts a record, and a second Open finds
// nothing to repair and the same records.
func FuzzOpen(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fsys := decodeDir(b)
		l, err := openMem(fsys, WithSegmentSize(MinSegmentSize))
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("unclassified error: %v", err)
			}
			if ce != nil && !isRecordError(ce.Reason) && !errors.Is(ce.Reason, ErrBadHeader) && !errors.Is(ce.Reason, ErrMissingSegment) {
				t.Fatalf("unclassified reason: %v", err)
			}
			if fsys.openFiles() != 0 {
				t.Fatalf("a failed Open left %d files open", fsys.openFiles())
			}
			return
		}
		first, err := tryReplay(l)
		if err != nil {
			t.Fatalf("replay after a successful Open: %v", err)
		}
		seq, err := l.Append(1, []byte("new"))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Wait(seq); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		l, err = openMem(fsys, WithSegmentSize(MinSegmentSize))
		if err != nil {
			t.Fatalf("second Open: %v", err)
		}
		defer l.Close()
		if l.Recovery().Torn != nil {
			t.Fatalf("second Open cut a torn tail: %+v", l.Recovery().Torn)
		}
		second, err := tryReplay(l)
		if err != nil {
			t.Fatal(err)
		}
		want := append(first.Records, irec{seq, 1, "new"})
		if second.SnapSeq != first.SnapSeq || len(second.Records) != len(want) {
			t.Fatalf("second replay %+v, want %+v", second, want)
		}
		for i := range want {
			if second.Records[i] != want[i] {
				t.Fatalf("record %d: %+v, want %+v", i, second.Records[i], want[i])
			}
		}
	})
}
