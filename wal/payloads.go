package wal

import (
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"

	"github.com/worklease/worklease"
)

// The payloads of a Manager's records, read back by sequence number: a Log
// is a worklease.PayloadJournal, so that a Manager keeps the bytes of its
// queued payloads here rather than in memory. The Log notes where each
// record with producers' fields lies (version 3 of worklease.Record's
// binary form, the only one that holds a Payload) as it writes the record,
// or finds it in Open, and reads the record back from its segment when
// asked. A snapshot written through SnapshotStateKeeping names the records
// it still refers to: the segments that hold them are kept, outside the
// records a replay reads, until a snapshot no longer refers to them.

var _ worklease.PayloadJournal = (*Log)(nil)

// recordVersionProduced is the first byte of the binary form of a
// worklease.Record with producers' fields: part of worklease's record
// format, which never changes.
const recordVersionProduced = 3

// A recordIndex locates the records with producers' fields in the
// segments, for ReadPayload.
type recordIndex struct {
	mu     sync.RWMutex      // guards segs, what each holds, and closed
	segs   []*indexedSegment // ascending ids
	closed bool              // the Log is closed: no file is opened again
}

// An indexedSegment is a segment's records with producers' fields.
type indexedSegment struct {
	id   uint64
	recs []recordPos // ascending sequence numbers
	// f is the segment opened for reading, on the first read; nil until
	// then. Reads use it under the index's read lock; it is closed under
	// its write lock when the segment is removed, or the Log closed.
	f file
}

// A recordPos is where a record's frame starts in its segment. 16 bytes a
// record: the index of a backlog of a million payloads takes 16 MiB.
type recordPos struct {
	seq uint64
	off int64
}

// isProduced reports whether a record of the given kind and payload is a
// Manager's record with producers' fields.
func isProduced(kind uint8, payload []byte) bool {
	return kind == RecordKind && len(payload) > 0 && payload[0] == recordVersionProduced
}

// producedFrames calls fn with the sequence number and offset of each
// frame in frames, a batch of whole frames (commit markers aside) as
// appendFrame writes them, that holds a Manager's record with producers'
// fields.
func producedFrames(frames []byte, fn func(seq uint64, off int)) {
	for p := 0; p+frameHeaderSize <= len(frames); {
		n := int(binary.LittleEndian.Uint32(frames[p:]))
		if end := p + frameHeaderSize + n; end <= len(frames) && isProduced(frames[p+8], frames[p+frameHeaderSize:end]) {
			fn(binary.LittleEndian.Uint64(frames[p+9:]), p)
		}
		p += frameHeaderSize + n
	}
}

// noteBatch indexes the records of batch, which is about to be written at
// base in segment id (the last segment, or the one after it).
func (x *recordIndex) noteBatch(id uint64, base int64, batch []byte) {
	var s *indexedSegment
	producedFrames(batch, func(seq uint64, off int) {
		if s == nil {
			// Held until the batch is indexed: a deferred unlock here
			// would run as this first call returns, and the appends of
			// the batch's later records would race with lookups.
			x.mu.Lock()
			s = x.segmentLocked(id)
		}
		s.recs = append(s.recs, recordPos{seq, base + int64(off)})
	})
	if s != nil {
		x.mu.Unlock()
	}
}

// segmentLocked returns segment id's entry, adding it if it is new, after
// every other. x.mu must be held for writing.
func (x *recordIndex) segmentLocked(id uint64) *indexedSegment {
	if n := len(x.segs); n > 0 && x.segs[n-1].id == id {
		return x.segs[n-1]
	}
	i, found := slices.BinarySearchFunc(x.segs, id, func(s *indexedSegment, id uint64) int { return cmpUint64(s.id, id) })
	if found {
		return x.segs[i]
	}
	s := &indexedSegment{id: id}
	x.segs = slices.Insert(x.segs, i, s)
	return s
}

// add indexes recs, found in segment id by Open.
func (x *recordIndex) add(id uint64, recs []recordPos) {
	if len(recs) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.segmentLocked(id)
	s.recs = append(s.recs, recs...)
}

// drop forgets the segments ids, which are being removed, and closes their
// files.
func (x *recordIndex) drop(ids []uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.segs = slices.DeleteFunc(x.segs, func(s *indexedSegment) bool {
		if !slices.Contains(ids, s.id) {
			return false
		}
		if s.f != nil {
			_ = s.f.Close() // only read from
		}
		return true
	})
}

// closeAll closes every file the index opened.
func (x *recordIndex) closeAll() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	for _, s := range x.segs {
		if s.f != nil {
			_ = s.f.Close() // only read from
			s.f = nil
		}
	}
}

// findLocked returns the segment and position of record seq, if indexed.
// x.mu must be held.
func (x *recordIndex) findLocked(seq uint64) (*indexedSegment, int64, bool) {
	// The segments hold ascending sequence numbers, in the order of
	// their ids.
	i, _ := slices.BinarySearchFunc(x.segs, seq, func(s *indexedSegment, seq uint64) int {
		if len(s.recs) == 0 || s.recs[len(s.recs)-1].seq < seq {
			return -1
		}
		return 1
	})
	if i == len(x.segs) {
		return nil, 0, false
	}
	s := x.segs[i]
	j, found := slices.BinarySearchFunc(s.recs, seq, func(p recordPos, seq uint64) int { return cmpUint64(p.seq, seq) })
	if !found {
		return nil, 0, false
	}
	return s, s.recs[j].off, true
}

// segmentOf returns the id of the segment that holds record seq, if the
// index has it.
func (x *recordIndex) segmentOf(seq uint64) (uint64, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s, _, ok := x.findLocked(seq)
	if !ok {
		return 0, false
	}
	return s.id, true
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ReadPayload implements worklease.PayloadJournal: it returns the Payload
// of the Manager's record seq, read back from its segment, and first
// writes the record if it is still buffered. The record must be one with
// a Payload (a Manager's Enqueued record with one), in a segment the log
// still has: one after the snapshot, or one the snapshot keeps for the
// records SnapshotStateKeeping named. It returns an error wrapping
// ErrInvalidSeq for any other, a *CorruptionError if the bytes read back
// are not the record, ErrClosed after Close, and the failure after the
// log failed. It reads on a read-only Log too.
func (l *Log) ReadPayload(seq uint64) ([]byte, error) {
	if f := l.failure.Load(); f != nil {
		return nil, f.err
	}
	if last := l.last.Load(); seq == 0 || seq > last {
		return nil, fmt.Errorf("%w: record %d was never appended; the last is %d", ErrInvalidSeq, seq, last)
	}
	if !l.cfg.readOnly {
		if err := l.waitFor(seq, false); err != nil {
			return nil, err
		}
	}
	frame, name, err := l.readIndexed(seq)
	if err != nil {
		return nil, err
	}
	var rec worklease.Record
	if err := rec.UnmarshalBinary(frame.payload); err != nil {
		return nil, corrupt(name, 0, ErrInvalidRecord, "record %d: %v", seq, err)
	}
	if rec.Payload == nil {
		return nil, fmt.Errorf("%w: record %d holds no payload", ErrInvalidSeq, seq)
	}
	return rec.Payload, nil // a copy: UnmarshalBinary copies it
}

// readIndexed reads the frame of record seq from where the index says it
// is, and returns it with its segment's name.
func (l *Log) readIndexed(seq uint64) (frame, string, error) {
	x := &l.index
	x.mu.RLock()
	s, off, ok := x.findLocked(seq)
	if ok && s.f == nil {
		x.mu.RUnlock()
		if err := l.openIndexed(s); err != nil {
			return frame{}, "", err
		}
		x.mu.RLock()
		s, off, ok = x.findLocked(seq)
	}
	defer x.mu.RUnlock()
	if x.closed {
		return frame{}, "", ErrClosed
	}
	if !ok || s.f == nil {
		return frame{}, "", fmt.Errorf("%w: record %d holds no payload the log has", ErrInvalidSeq, seq)
	}
	name := segmentName(s.id)
	var hdr [frameHeaderSize]byte
	if _, err := s.f.ReadAt(hdr[:], off); err != nil {
		return frame{}, "", l.readErr(name, off, err)
	}
	n, err := checkHeader(hdr[:], MaxRecordSizeLimit, MaxRecordSizeLimit)
	if err != nil {
		return frame{}, "", &CorruptionError{File: name, Offset: off, Reason: err}
	}
	b := make([]byte, frameHeaderSize+int(n))
	if _, err := s.f.ReadAt(b, off); err != nil {
		return frame{}, "", l.readErr(name, off, err)
	}
	fr, err := checkFrame(b)
	if err == nil && (fr.kind != RecordKind || fr.seq != seq) {
		err = reasonf(ErrInvalidRecord, "record %d of kind %d where record %d was", fr.seq, fr.kind, seq)
	}
	if err != nil {
		return frame{}, "", &CorruptionError{File: name, Offset: off, Reason: err}
	}
	return fr, name, nil
}

// readErr is the error of a read at off in segment name that failed with
// err: a file cut short is corruption.
func (l *Log) readErr(name string, off int64, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return corrupt(name, off, ErrUnexpectedEOF, "the record ends past the end of the file")
	}
	return fmt.Errorf("wal: read %s: %w", name, err)
}

// openIndexed opens s's file for reading, unless that is done.
func (l *Log) openIndexed(s *indexedSegment) error {
	x := &l.index
	x.mu.Lock()
	defer x.mu.Unlock()
	if s.f != nil || x.closed || !slices.Contains(x.segs, s) {
		return nil // opened meanwhile, or removed: the caller looks again
	}
	f, err := l.fs.Open(filepath.Join(l.dir, segmentName(s.id)))
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", segmentName(s.id), err)
	}
	s.f = f
	return nil
}

// SnapshotStateKeeping implements worklease.PayloadJournal: it is
// SnapshotState, and write may call keep with the sequence number of each
// record its data refers to. The segments that hold those records stay,
// named in the snapshot file, and ReadPayload reads them, now and after
// Open, until a later snapshot no longer refers to them; the other
// segments the snapshot covers are removed as WriteSnapshot removes them.
// A kept segment costs its whole size on disk: a record a snapshot still
// refers to keeps the records beside it there too.
func (l *Log) SnapshotStateKeeping(write func(w io.Writer, keep func(seq uint64)) error) error {
	kept := map[uint64]bool{} // segment ids; write and keep run on one goroutine
	keep := func(seq uint64) {
		if id, ok := l.index.segmentOf(seq); ok {
			kept[id] = true
		}
	}
	return l.snapshotState(func(w io.Writer) error { return write(w, keep) }, kept)
}
