package wal

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
)

// Replay reads the log back: it calls snapshot with the latest snapshot, if
// there is one, then record with every record after it, in sequence order,
// up to the last record written to the files when Replay began. Either
// function may be nil. Replay is meant to run once, after Open and before the
// first Append, to rebuild the state the log describes; it may run at any
// time.
//
// The data and payload slices are valid only until the function returns.
// Replay holds no lock while it calls them: they may call any method of the
// Log. An error from either function stops the replay and is returned
// wrapped. Bytes that changed on disk since Open are reported as a
// [*CorruptionError]. Replay returns ErrClosed after Close, and the failure
// after the log failed.
func (l *Log) Replay(snapshot func(seq uint64, data []byte) error, record func(seq uint64, kind uint8, payload []byte) error) error {
	if f := l.failure.Load(); f != nil {
		return f.err
	}
	l.flush.Lock()
	if l.flush.closing {
		l.flush.Unlock()
		return ErrClosed
	}
	segs := slices.Clone(l.flush.segments)
	hasSnap := l.flush.snapSeq > 0
	l.flush.replaying++ // keeps every segment in segs on disk
	l.flush.Unlock()
	defer func() {
		l.flush.Lock()
		l.flush.replaying--
		l.flush.Unlock()
	}()

	// The snapshot read here may be newer than the one of segs; segs still
	// holds every record after it, since none was removed meanwhile.
	var after uint64
	if hasSnap {
		seq, data, err := l.readSnapshot()
		if err != nil {
			return err
		}
		after = seq
		if snapshot != nil {
			if err := snapshot(seq, data); err != nil {
				return fmt.Errorf("wal: replay the snapshot of records up to %d: %w", seq, err)
			}
		}
	}
	if record == nil {
		return nil
	}
	var fr frameReader
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].firstSeq-1 <= after {
			continue // every record in s is in the snapshot
		}
		if err := l.replaySegment(&fr, s, after, record); err != nil {
			return err
		}
	}
	return nil
}

// replaySegment calls fn for the records of s after the sequence number
// after.
func (l *Log) replaySegment(fr *frameReader, s segment, after uint64, fn func(seq uint64, kind uint8, payload []byte) error) error {
	name := segmentName(s.id)
	f, err := l.fs.Open(filepath.Join(l.dir, name))
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", name, err)
	}
	defer f.Close()
	hb := make([]byte, segmentHeaderSize)
	if _, err := f.ReadAt(hb, 0); err != nil {
		return fmt.Errorf("wal: read %s: %w", name, err)
	}
	h, err := decodeSegmentHeader(hb)
	if err == nil && (h.id != s.id || h.firstSeq != s.firstSeq) {
		err = reasonf(ErrBadHeader, "the header changed since Open")
	}
	if err != nil {
		return &CorruptionError{File: name, Offset: 0, Reason: err}
	}
	fr.reset(f, segmentHeaderSize, s.size, h.maxRecord)
	expect := s.firstSeq
	for {
		off := fr.off
		fm, err := fr.next()
		switch {
		case err == io.EOF:
			return nil
		case err != nil && isRecordError(err):
			return &CorruptionError{File: name, Offset: off, Reason: err}
		case err != nil:
			return fmt.Errorf("wal: read %s: %w", name, err)
		case fm.kind == kindCommit:
			continue
		case fm.seq != expect:
			return corrupt(name, off, ErrInvalidRecord, "sequence number %d, want %d", fm.seq, expect)
		}
		expect++
		if fm.seq <= after {
			continue
		}
		if err := fn(fm.seq, fm.kind, fm.payload); err != nil {
			return fmt.Errorf("wal: replay record %d: %w", fm.seq, err)
		}
	}
}
