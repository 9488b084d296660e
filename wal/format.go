package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

// The on-disk format. Every constant in this block is part of the on-disk
// format; never change one. A new format gets a new version number instead,
// and readers keep reading the old one. doc.go draws the layout.
const (
	segmentMagic      = "WLSG" // first bytes of every segment file
	segmentVersion    = 1      // the segment format this package writes and reads
	segmentHeaderSize = 32     // magic 4, version 4, segment id 8, first seq 8, max record 4, CRC 4

	frameHeaderSize   = 17   // length 4, CRC 4, kind 1, seq 8
	kindCommit        = 0xFF // the kind of a commit marker
	commitPayloadSize = 12   // count 4, synced offset 8
	commitFrameSize   = frameHeaderSize + commitPayloadSize

	snapshotMagic       = "WLSN" // first bytes of every snapshot file
	snapshotVersion     = 1      // the snapshot format this package writes and reads
	snapshotHeaderSize  = 16     // magic 4, version 4, seq 8
	snapshotTrailerSize = 12     // data length 8, CRC 4

	keptMagic   = "WLKP" // first bytes of the kept file
	keptVersion = 1      // the kept file's format this package writes and reads
	keptHeader  = 20     // magic 4, version 4, snapshot seq 8, count 4; then the ids, 8 each, and a CRC 4

	segmentSuffix = ".wal"     // a segment is named by its id: %016x.wal
	tempSuffix    = ".tmp"     // a file being written, renamed into place once synced
	snapshotName  = "snapshot" // the one snapshot file
	keptName      = "kept"     // the segments the snapshot keeps for their records, if any
	lockName      = "LOCK"     // the file that Open locks
)

// Record kinds available to callers of Append. Kind 0 and the kinds above
// MaxKind are reserved for the log itself: 255 marks the end of a batch.
// These values are part of the on-disk format; never change them.
const (
	MinKind uint8 = 1   // the smallest kind Append accepts
	MaxKind uint8 = 127 // the largest kind Append accepts
)

// castagnoli is the CRC-32C table used for every checksum in the format.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentName is the file name of segment id.
func segmentName(id uint64) string { return fmt.Sprintf("%016x%s", id, segmentSuffix) }

// parseSegmentName returns the id of a segment file name. It accepts only the
// exact form segmentName produces, so two names never share an id.
func parseSegmentName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || id == 0 || segmentName(id) != name {
		return 0, false
	}
	return id, true
}

// isTempName reports whether name is a temporary file that the log writes
// before renaming it into place: a segment's, the snapshot's or the kept
// file's.
func isTempName(name string) bool {
	base, ok := strings.CutSuffix(name, tempSuffix)
	if !ok {
		return false
	}
	if base == snapshotName || base == keptName {
		return true
	}
	_, ok = parseSegmentName(base)
	return ok
}

// A segmentHeader opens every segment file.
type segmentHeader struct {
	id        uint64 // equals the id in the file name
	firstSeq  uint64 // sequence number of the segment's first record, if it has one
	maxRecord uint32 // the largest payload a record in this segment may carry
}

func (h segmentHeader) encode() []byte {
	b := make([]byte, 0, segmentHeaderSize)
	b = append(b, segmentMagic...)
	b = binary.LittleEndian.AppendUint32(b, segmentVersion)
	b = binary.LittleEndian.AppendUint64(b, h.id)
	b = binary.LittleEndian.AppendUint64(b, h.firstSeq)
	b = binary.LittleEndian.AppendUint32(b, h.maxRecord)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSegmentHeader checks and decodes a segment header. Its errors wrap
// ErrBadHeader, or ErrUnsupportedVersion for a valid header of another
// version.
func decodeSegmentHeader(b []byte) (segmentHeader, error) {
	if len(b) < segmentHeaderSize {
		return segmentHeader{}, reasonf(ErrBadHeader, "file is %d bytes, shorter than a segment header", len(b))
	}
	b = b[:segmentHeaderSize]
	if string(b[:4]) != segmentMagic {
		return segmentHeader{}, reasonf(ErrBadHeader, "bad magic %q", b[:4])
	}
	if got, want := crc32.Checksum(b[:28], castagnoli), binary.LittleEndian.Uint32(b[28:]); got != want {
		return segmentHeader{}, reasonf(ErrBadHeader, "header checksum mismatch")
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != segmentVersion {
		return segmentHeader{}, fmt.Errorf("%w: segment version %d, this package reads %d", ErrUnsupportedVersion, v, segmentVersion)
	}
	h := segmentHeader{
		id:        binary.LittleEndian.Uint64(b[8:]),
		firstSeq:  binary.LittleEndian.Uint64(b[16:]),
		maxRecord: binary.LittleEndian.Uint32(b[24:]),
	}
	if h.id == 0 || h.firstSeq == 0 || h.maxRecord == 0 || h.maxRecord > MaxRecordSizeLimit {
		return segmentHeader{}, reasonf(ErrBadHeader, "id %d, first sequence %d, max record %d out of range", h.id, h.firstSeq, h.maxRecord)
	}
	return h, nil
}

// A frame is one decoded record or commit marker. Its payload aliases the
// buffer it was decoded from.
type frame struct {
	kind    uint8
	seq     uint64
	payload []byte
}

// appendFrame appends the encoding of one frame to dst, CRC included.
func appendFrame(dst []byte, kind uint8, seq uint64, payload []byte) []byte {
	start := len(dst)
	dst = appendFrameNoCRC(dst, kind, seq, payload)
	putFrameCRCs(dst[start:])
	return dst
}

// appendFrameNoCRC appends one frame to dst without its CRC, which
// putFrameCRCs computes when the frame is written.
func appendFrameNoCRC(dst []byte, kind uint8, seq uint64, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeaderSize)...) // filled in by putFrameHeader
	dst = append(dst, payload...)
	putFrameHeader(dst[start:], kind, seq)
	return dst
}

// putFrameHeader fills in the header of the frame f, whose payload is
// already in place after the header's frameHeaderSize bytes, all but its
// CRC, so that a payload can be encoded straight into the buffer that
// holds its frame.
func putFrameHeader(f []byte, kind uint8, seq uint64) {
	binary.LittleEndian.PutUint32(f, uint32(len(f)-frameHeaderSize))
	f[8] = kind
	binary.LittleEndian.PutUint64(f[9:], seq)
}

// putFrameCRCs fills in the CRC of each frame of batch, whole frames
// without their CRC, one after the other. The flush leader does it as it
// writes a batch, outside the lock under which the frames were appended:
// appends go on meanwhile, and an append under SyncNone, which waits for
// nothing, does not pay for the CRC.
func putFrameCRCs(batch []byte) {
	for len(batch) > 0 {
		n := frameHeaderSize + int(binary.LittleEndian.Uint32(batch))
		// The CRC covers the length and then everything after the CRC
		// (see frameCRC). With a copy of the length where the CRC goes,
		// that is one run, from byte 4 to the frame's end, which costs one
		// call rather than two.
		run := batch[4:n]
		copy(run[:4], batch[:4])
		binary.LittleEndian.PutUint32(run, crc32.Update(0, castagnoli, run))
		batch = batch[n:]
	}
}

// appendCommit appends the commit marker closing a batch of count records
// whose last is lastSeq. synced is the offset in the segment up to which the
// log knew the file was synced when it wrote the batch.
func appendCommit(dst []byte, lastSeq uint64, count int, synced int64) []byte {
	var p [commitPayloadSize]byte
	binary.LittleEndian.PutUint32(p[0:], uint32(count))
	binary.LittleEndian.PutUint64(p[4:], uint64(synced))
	return appendFrame(dst, kindCommit, lastSeq, p[:])
}

// decodeCommit returns the record count and synced offset of a commit
// marker's payload, which checkFrame has checked is commitPayloadSize long.
func decodeCommit(p []byte) (count uint32, synced int64) {
	return binary.LittleEndian.Uint32(p), int64(binary.LittleEndian.Uint64(p[4:]))
}

// frameCRC is the CRC-32C of a frame: its length field, then everything after
// the CRC field (kind, seq, payload).
func frameCRC(f []byte) uint32 {
	c := crc32.Update(0, castagnoli, f[:4])
	return crc32.Update(c, castagnoli, f[8:])
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkHeader checks a frame header, given how many bytes follow it in the
// file and the maximum record payload length, and returns the payload
// length. Nothing is allocated, whatever the length field says.
func checkHeader(h []byte, avail int64, limit uint32) (uint32, error) {
	if allZero(h[:frameHeaderSize]) {
		return 0, ErrZeroedRecord
	}
	n := binary.LittleEndian.Uint32(h)
	if h[8] == kindCommit {
		limit = commitPayloadSize // whatever the record limit
	}
	if n > limit {
		return 0, reasonf(ErrInvalidRecord, "length %d exceeds the maximum %d", n, limit)
	}
	if int64(n) > avail {
		return 0, reasonf(ErrUnexpectedEOF, "record of %d bytes, %d left", n, avail)
	}
	return n, nil
}

// checkFrame checks a whole frame, whose header checkHeader accepted, and
// decodes it. The payload aliases f.
func checkFrame(f []byte) (frame, error) {
	if got, want := frameCRC(f), binary.LittleEndian.Uint32(f[4:]); got != want {
		return frame{}, reasonf(ErrInvalidRecord, "checksum mismatch")
	}
	fr := frame{kind: f[8], seq: binary.LittleEndian.Uint64(f[9:]), payload: f[frameHeaderSize:]}
	switch {
	case fr.kind == kindCommit:
		if len(fr.payload) != commitPayloadSize {
			return frame{}, reasonf(ErrInvalidRecord, "commit marker of %d bytes", len(fr.payload))
		}
	case fr.kind < MinKind || fr.kind > MaxKind:
		return frame{}, reasonf(ErrInvalidRecord, "reserved kind %d", fr.kind)
	}
	return fr, nil
}

// decodeFrame decodes the frame at the start of b, whose payload limit is limit,
// and returns it with its encoded size. Its errors wrap ErrZeroedRecord,
// ErrInvalidRecord or ErrUnexpectedEOF. It never panics and never allocates
// more than the error it returns.
func decodeFrame(b []byte, limit uint32) (frame, int, error) {
	if len(b) < frameHeaderSize {
		if allZero(b) {
			return frame{}, 0, ErrZeroedRecord
		}
		return frame{}, 0, reasonf(ErrUnexpectedEOF, "%d bytes left, a record header needs %d", len(b), frameHeaderSize)
	}
	n, err := checkHeader(b, int64(len(b)-frameHeaderSize), limit)
	if err != nil {
		return frame{}, 0, err
	}
	size := frameHeaderSize + int(n)
	f, err := checkFrame(b[:size])
	if err != nil {
		return frame{}, 0, err
	}
	return f, size, nil
}

// readBufferSize is the largest buffer frames are read through; a smaller
// file gets a buffer its size. Frames that fit in the buffer are decoded in
// place.
const readBufferSize = 256 << 10

// A frameReader decodes the frames of one segment, in order.
type frameReader struct {
	br      *bufio.Reader
	off     int64  // file offset of the next frame
	end     int64  // file offset where the frames end
	limit   uint32 // the segment's maximum record size
	scratch []byte // holds frames larger than the read buffer
}

// reset points fr at the frames in r between off and end.
func (fr *frameReader) reset(r io.ReaderAt, off, end int64, limit uint32) {
	sr := io.NewSectionReader(r, off, end-off)
	if size := int(min(end-off, readBufferSize)); fr.br == nil || fr.br.Size() < size {
		fr.br = bufio.NewReaderSize(sr, size)
	} else {
		fr.br.Reset(sr)
	}
	fr.off, fr.end, fr.limit = off, end, limit
}

// next decodes the frame at fr.off and moves past it. It returns io.EOF at
// fr.end, an error wrapping ErrZeroedRecord, ErrInvalidRecord or
// ErrUnexpectedEOF for bad bytes (without moving), or an I/O error. The
// frame's payload is valid until the next call.
func (fr *frameReader) next() (frame, error) {
	left := fr.end - fr.off
	if left <= 0 {
		return frame{}, io.EOF
	}
	if left < frameHeaderSize {
		b, err := fr.peek(int(left))
		if err != nil {
			return frame{}, err
		}
		_, _, err = decodeFrame(b, fr.limit)
		return frame{}, err
	}
	h, err := fr.peek(frameHeaderSize)
	if err != nil {
		return frame{}, err
	}
	n, err := checkHeader(h, left-frameHeaderSize, fr.limit)
	if err != nil {
		return frame{}, err
	}
	size := frameHeaderSize + int(n)
	var b []byte
	inPlace := size <= fr.br.Size()
	if inPlace {
		if b, err = fr.peek(size); err != nil {
			return frame{}, err
		}
	} else {
		// checkHeader bounded n by the bytes left in the file, so the
		// allocation is no larger than the file.
		if cap(fr.scratch) < size {
			fr.scratch = make([]byte, size)
		}
		b = fr.scratch[:size]
		if _, err := io.ReadFull(fr.br, b); err != nil {
			return frame{}, fr.readErr(err)
		}
	}
	f, err := checkFrame(b)
	if err != nil {
		return frame{}, err
	}
	if inPlace {
		_, _ = fr.br.Discard(size) // cannot fail: the bytes were peeked
	}
	fr.off += int64(size)
	return f, nil
}

func (fr *frameReader) peek(n int) ([]byte, error) {
	b, err := fr.br.Peek(n)
	if err != nil {
		return nil, fr.readErr(err)
	}
	return b, nil
}

// readErr maps an early end of the file, which shrank since its size was
// taken, to ErrUnexpectedEOF.
func (fr *frameReader) readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return reasonf(ErrUnexpectedEOF, "file ends before offset %d", fr.end)
	}
	return err
}

// syncedPast reports whether a valid commit marker between from and end
// proves that offset bad had been synced when the marker was written: the
// marker's synced offset lies beyond bad. Damage at bad is then corruption of
// committed data, not a torn write. afterSeq is the last sequence number
// committed before bad: a proving marker closes a later batch.
func syncedPast(r io.ReaderAt, from, end, bad int64, afterSeq uint64) (bool, error) {
	const chunk = 1 << 20
	if end-from < commitFrameSize {
		return false, nil
	}
	buf := make([]byte, min(end-from, chunk+commitFrameSize))
	for pos := from; ; {
		b := buf[:min(int64(len(buf)), end-pos)]
		if _, err := r.ReadAt(b, pos); err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		for i := 0; i+commitFrameSize <= len(b); i++ {
			if b[i+8] != kindCommit || binary.LittleEndian.Uint32(b[i:]) != commitPayloadSize {
				continue
			}
			f, err := checkFrame(b[i : i+commitFrameSize])
			if err != nil {
				continue
			}
			count, synced := decodeCommit(f.payload)
			at := pos + int64(i)
			if count > 0 && f.seq > afterSeq && synced > bad && synced <= at {
				return true, nil
			}
		}
		if pos+int64(len(b)) >= end {
			return false, nil
		}
		pos += int64(len(b)) - commitFrameSize + 1 // overlap: a marker may straddle two chunks
	}
}

// snapshotHeader returns the header of a snapshot covering seq.
func snapshotHeader(seq uint64) []byte {
	b := make([]byte, 0, snapshotHeaderSize)
	b = append(b, snapshotMagic...)
	b = binary.LittleEndian.AppendUint32(b, snapshotVersion)
	return binary.LittleEndian.AppendUint64(b, seq)
}

// decodeSnapshot checks a whole snapshot file and returns the sequence number
// it covers and its data, which aliases b. name labels its errors.
func decodeSnapshot(name string, b []byte) (uint64, []byte, error) {
	if len(b) < snapshotHeaderSize+snapshotTrailerSize {
		return 0, nil, corrupt(name, 0, ErrUnexpectedEOF, "snapshot is %d bytes, shorter than its header and trailer", len(b))
	}
	if string(b[:4]) != snapshotMagic {
		return 0, nil, corrupt(name, 0, ErrBadHeader, "bad magic %q", b[:4])
	}
	trailer := len(b) - snapshotTrailerSize
	if got, want := crc32.Checksum(b[:trailer+8], castagnoli), binary.LittleEndian.Uint32(b[trailer+8:]); got != want {
		return 0, nil, corrupt(name, int64(trailer), ErrInvalidRecord, "snapshot checksum mismatch")
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != snapshotVersion {
		return 0, nil, fmt.Errorf("%w: snapshot version %d, this package reads %d", ErrUnsupportedVersion, v, snapshotVersion)
	}
	seq := binary.LittleEndian.Uint64(b[8:])
	data := b[snapshotHeaderSize:trailer]
	if n := binary.LittleEndian.Uint64(b[trailer:]); n != uint64(len(data)) || seq == 0 {
		return 0, nil, corrupt(name, 0, ErrBadHeader, "snapshot of sequence %d says %d data bytes, holds %d", seq, n, len(data))
	}
	return seq, data, nil
}

// encodeKept returns the kept file naming ids, the segments that the
// snapshot covering seq keeps for the records it refers to.
func encodeKept(seq uint64, ids []uint64) []byte {
	b := make([]byte, 0, keptHeader+8*len(ids)+4)
	b = append(b, keptMagic...)
	b = binary.LittleEndian.AppendUint32(b, keptVersion)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeKept checks a whole kept file and returns the snapshot's sequence
// number it was written for and the segment ids it names.
func decodeKept(b []byte) (uint64, []uint64, error) {
	if len(b) < keptHeader+4 {
		return 0, nil, corrupt(keptName, 0, ErrUnexpectedEOF, "kept file is %d bytes, shorter than its header", len(b))
	}
	if string(b[:4]) != keptMagic {
		return 0, nil, corrupt(keptName, 0, ErrBadHeader, "bad magic %q", b[:4])
	}
	end := len(b) - 4
	if got, want := crc32.Checksum(b[:end], castagnoli), binary.LittleEndian.Uint32(b[end:]); got != want {
		return 0, nil, corrupt(keptName, int64(end), ErrInvalidRecord, "kept file checksum mismatch")
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != keptVersion {
		return 0, nil, fmt.Errorf("%w: kept file version %d, this package reads %d", ErrUnsupportedVersion, v, keptVersion)
	}
	seq := binary.LittleEndian.Uint64(b[8:])
	n := binary.LittleEndian.Uint32(b[16:])
	if uint64(n)*8 != uint64(end-keptHeader) {
		return 0, nil, corrupt(keptName, 16, ErrBadHeader, "kept file names %d segments in %d bytes", n, end-keptHeader)
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(b[keptHeader+8*i:])
	}
	return seq, ids, nil
}
