package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFrameRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		kind    uint8
		seq     uint64
		payload []byte
	}{
		{"empty payload", 1, 1, nil},
		{"small", 7, 42, []byte("hello")},
		{"max kind, max seq", MaxKind, ^uint64(0), []byte{0, 1, 2}},
		{"large", 3, 9, bytes.Repeat([]byte{0xAB}, 70_000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := appendFrame([]byte("prefix"), tt.kind, tt.seq, tt.payload)
			require.Equal(t, "prefix", string(b[:6]))
			f, n, err := decodeFrame(b[6:], uint32(len(tt.payload)))
			require.NoError(t, err)
			assert.Equal(t, frameHeaderSize+len(tt.payload), n)
			assert.Equal(t, tt.kind, f.kind)
			assert.Equal(t, tt.seq, f.seq)
			assert.Equal(t, len(tt.payload), len(f.payload))
			assert.True(t, bytes.Equal(tt.payload, f.payload))

			_, _, err = decodeFrame(b[6:], uint32(len(tt.payload))-1)
			if len(tt.payload) > 0 {
				require.ErrorIs(t, err, ErrInvalidRecord, "the limit applies when reading too")
			}
		})
	}
}

// TestFrameCRCs checks that a batch of frames appended without their CRCs
// and then given them by putFrameCRCs, as a flush leader does, is byte for
// byte the frames appendFrame writes, and that the CRCs were missing before.
func TestFrameCRCs(t *testing.T) {
	t.Parallel()
	var open, sealed []byte
	for i, p := range [][]byte{nil, []byte("a"), bytes.Repeat([]byte("xyz"), 100), []byte("last")} {
		open = appendFrameNoCRC(open, uint8(1+i), uint64(10+i), p)
		sealed = appendFrame(sealed, uint8(1+i), uint64(10+i), p)
	}
	require.Len(t, open, len(sealed))
	require.NotEqual(t, sealed, open, "no CRC before putFrameCRCs")
	putFrameCRCs(open)
	assert.Equal(t, sealed, open)
}

func TestCommitMarkerRoundTrip(t *testing.T) {
	t.Parallel()
	b := appendCommit(nil, 77, 5, 1234)
	require.Len(t, b, commitFrameSize)
	f, n, err := decodeFrame(b, 1) // a marker is read whatever the record limit
	require.NoError(t, err)
	assert.Equal(t, commitFrameSize, n)
	assert.Equal(t, uint8(kindCommit), f.kind)
	assert.Equal(t, uint64(77), f.seq)
	count, synced := decodeCommit(f.payload)
	assert.Equal(t, uint32(5), count)
	assert.Equal(t, int64(1234), synced)
}

// frameWith returns a frame whose fields are set by hand, with a valid CRC
// unless the caller breaks it afterwards.
func frameWith(length uint32, kind uint8, seq uint64, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, length)
	b = append(b, 0, 0, 0, 0, kind)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = append(b, payload...)
	binary.LittleEndian.PutUint32(b[4:], frameCRC(b))
	return b
}

func TestDecodeFrameErrors(t *testing.T) {
	t.Parallel()
	good := appendFrame(nil, 1, 5, []byte("payload"))
	flipped := bytes.Clone(good)
	flipped[frameHeaderSize+2] ^= 0x01
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"zeroed header", make([]byte, 64), ErrZeroedRecord},
		{"a few zero bytes", make([]byte, 5), ErrZeroedRecord},
		{"partial header", good[:10], ErrUnexpectedEOF},
		{"partial payload", good[:len(good)-1], ErrUnexpectedEOF},
		{"length over the limit", frameWith(1<<20+1, 1, 5, nil), ErrInvalidRecord},
		{"commit marker with a long length", frameWith(13, kindCommit, 5, make([]byte, 13)), ErrInvalidRecord},
		{"length 4GiB", frameWith(0xFFFFFFFF, 1, 5, nil), ErrInvalidRecord},
		{"length past the end", frameWith(100, 1, 5, []byte("short")), ErrUnexpectedEOF},
		{"flipped payload bit", flipped, ErrInvalidRecord},
		{"kind 0 with a valid CRC", frameWith(0, 0, 5, nil), ErrInvalidRecord},
		{"reserved kind", frameWith(1, 200, 5, []byte{1}), ErrInvalidRecord},
		{"commit marker of the wrong size", frameWith(3, kindCommit, 5, []byte{1, 2, 3}), ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := decodeFrame(tt.b, 1<<20)
			require.ErrorIs(t, err, tt.want)
			assert.True(t, isRecordError(err))
		})
	}
}

func TestSegmentHeader(t *testing.T) {
	t.Parallel()
	h := segmentHeader{id: 3, firstSeq: 100, maxRecord: 4096}
	b := h.encode()
	require.Len(t, b, segmentHeaderSize)
	got, err := decodeSegmentHeader(b)
	require.NoError(t, err)
	assert.Equal(t, h, got)

	v2 := bytes.Clone(b)
	binary.LittleEndian.PutUint32(v2[4:], 2)
	binary.LittleEndian.PutUint32(v2[28:], crc32c(v2[:28]))
	badRange := segmentHeader{id: 3, firstSeq: 100, maxRecord: MaxRecordSizeLimit + 1}.encode()
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", b[:20], ErrBadHeader},
		{"bad magic", append([]byte("XXXX"), b[4:]...), ErrBadHeader},
		{"bit flip", flip(b, 9), ErrBadHeader},
		{"future version", v2, ErrUnsupportedVersion},
		{"max record out of range", badRange, ErrBadHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeSegmentHeader(tt.b)
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func TestSegmentNames(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "00000000000000ff.wal", segmentName(255))
	tests := []struct {
		name string
		id   uint64
		ok   bool
		temp bool
	}{
		{"0000000000000001.wal", 1, true, false},
		{"00000000000000ff.wal", 255, true, false},
		{"00000000000000FF.wal", 0, false, false},
		{"0000000000000000.wal", 0, false, false},
		{"000000000000001.wal", 0, false, false},
		{"0000000000000001.wal.tmp", 0, false, true},
		{"snapshot.tmp", 0, false, true},
		{"notes.tmp", 0, false, false},
		{"snapshot", 0, false, false},
		{"LOCK", 0, false, false},
	}
	for _, tt := range tests {
		id, ok := parseSegmentName(tt.name)
		assert.Equal(t, tt.ok, ok, tt.name)
		assert.Equal(t, tt.id, id, tt.name)
		assert.Equal(t, tt.temp, isTempName(tt.name), tt.name)
	}
}

func TestDecodeSnapshot(t *testing.T) {
	t.Parallel()
	var buf memBuffer
	sw := &snapshotWriter{f: &buf, buf: make([]byte, 0, 7)} // a tiny buffer exercises the flushes
	sw.raw(snapshotHeader(42))
	_, err := io.WriteString(sw, "the whole state")
	require.NoError(t, err)
	require.NoError(t, sw.finish())
	_, err = sw.Write([]byte("late"))
	require.ErrorIs(t, err, errSnapshotDone)
	good := buf.b

	seq, data, err := decodeSnapshot("snapshot", good)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), seq)
	assert.Equal(t, "the whole state", string(data))

	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrUnexpectedEOF},
		{"truncated", good[:len(good)-1], ErrInvalidRecord},
		{"bad magic", append([]byte("XXXX"), good[4:]...), ErrBadHeader},
		{"flipped data", flip(good, snapshotHeaderSize+3), ErrInvalidRecord},
		{"flipped seq", flip(good, 9), ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := decodeSnapshot("snapshot", tt.b)
			require.ErrorIs(t, err, tt.want)
			if !errors.Is(err, ErrUnsupportedVersion) {
				require.ErrorIs(t, err, ErrCorrupt)
			}
		})
	}
}

// FuzzDecode feeds arbitrary bytes to the frame decoder, as a run of frames
// and as the body of a segment. It must never panic; every frame it accepts
// must re-encode to the same bytes; every rejection must be classified.
func FuzzDecode(f *testing.F) {
	var valid []byte
	valid = appendFrame(valid, 1, 1, []byte("first"))
	valid = appendFrame(valid, 2, 2, nil)
	valid = appendCommit(valid, 2, 2, segmentHeaderSize)
	f.Add(valid)
	f.Add(appendFrame(nil, MaxKind, 7, bytes.Repeat([]byte("x"), 300)))
	f.Add(appendCommit(nil, 9, 1, 32))
	f.Add(valid[:len(valid)-3])
	f.Add(make([]byte, 40))
	f.Add(frameWith(0xFFFFFFFF, 1, 1, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 1 << 12
		for rest := b; len(rest) > 0; {
			fr, n, err := decodeFrame(rest, limit)
			if err != nil {
				if !isRecordError(err) {
					t.Fatalf("unclassified error %v", err)
				}
				break
			}
			if n < frameHeaderSize || n > len(rest) {
				t.Fatalf("frame size %d out of range (%d bytes)", n, len(rest))
			}
			if again := appendFrame(nil, fr.kind, fr.seq, fr.payload); !bytes.Equal(again, rest[:n]) {
				t.Fatalf("frame does not re-encode to its bytes")
			}
			rest = rest[n:]
		}

		seg := append(segmentHeader{id: 1, firstSeq: 1, maxRecord: limit}.encode(), b...)
		res, err := scanFrames(bytes.NewReader(seg), int64(len(seg)), segmentHeader{id: 1, firstSeq: 1, maxRecord: limit}, nil)
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		if res.end < segmentHeaderSize || res.end > int64(len(seg)) || (res.bad >= 0) != (res.end < int64(len(seg))) {
			t.Fatalf("scan result %+v for %d bytes", res, len(seg))
		}
		if res.bad >= 0 && !isRecordError(res.reason) {
			t.Fatalf("unclassified reason %v", res.reason)
		}
		if _, err := syncedPast(bytes.NewReader(seg), segmentHeaderSize, int64(len(seg)), segmentHeaderSize, 0); err != nil {
			t.Fatalf("syncedPast: %v", err)
		}
	})
}

// flip returns a copy of b with the bits of byte i inverted.
func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0xFF
	return c
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// memBuffer is a file that only supports WriteAt, for the snapshot writer.
type memBuffer struct{ b []byte }

func (m *memBuffer) WriteAt(p []byte, off int64) (int, error) {
	m.b = writeAt(m.b, p, off)
	return len(p), nil
}
func (m *memBuffer) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }
func (m *memBuffer) Sync() error                       { return nil }
func (m *memBuffer) Truncate(int64) error              { return nil }
func (m *memBuffer) Size() (int64, error)              { return int64(len(m.b)), nil }
func (m *memBuffer) Close() error                      { return nil }

// The kept file reads back what was written, and any flipped byte is
// refused.
func TestKeptFile(t *testing.T) {
	t.Parallel()
	b := encodeKept(42, []uint64{3, 9})
	seq, ids, err := decodeKept(b)
	require.NoError(t, err)
	require.Equal(t, uint64(42), seq)
	require.Equal(t, []uint64{3, 9}, ids)
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 0x10
		_, _, err := decodeKept(bad)
		require.Error(t, err, "byte %d flipped", i)
	}
	_, _, err = decodeKept(b[:len(b)-1])
	require.Error(t, err)
}
