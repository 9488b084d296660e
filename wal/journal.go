package wal

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/worklease/worklease"
)

// A Log is a worklease.Journal: pass it to worklease.WithJournal. The
// Manager's records are stored as records of kind RecordKind, encoded with
// worklease.Record's binary form; the Manager's snapshots are the log's.
var _ worklease.Journal = (*Log)(nil)

// RecordKind is the kind of the records a Manager journals.
const RecordKind uint8 = 1 // part of the on-disk format; never change

// AppendRecord implements worklease.Journal: it appends rec's binary form
// as a record of kind RecordKind. It returns the errors Append returns.
//
// It encodes rec straight into the log's buffer, under the lock that orders
// the records: encoding a Manager's record costs less than copying the
// Record would. The CRC is left to whoever writes the buffer (the
// write-behind goroutine, mostly, under SyncNone), off the caller's path.
//
// On a read-only Log it returns ErrReadOnly. A Manager built on one (to look
// at a journal, as the worklease-wal command does) answers the calls that
// change nothing; the first call that would change something fails it closed
// with worklease.ErrJournalFailed, wrapping ErrReadOnly, and nothing is
// written. Give such a Manager a Clock that never reaches a lease's expiry,
// such as one that always returns the zero time: with a real clock, even
// Inspect revokes an expired lease, which is a change.
func (l *Log) AppendRecord(rec worklease.Record) (uint64, error) {
	if l.cfg.readOnly {
		return 0, ErrReadOnly
	}
	l.mu.Lock()
	seq, err := l.nextSeqLocked()
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	buf := l.buf
	start := len(buf)
	buf = append(buf, make([]byte, frameHeaderSize)...) // filled in by putFrameHeader
	buf, _ = rec.AppendBinary(buf)
	f := buf[start:]
	if size := len(f) - frameHeaderSize; size > l.cfg.maxRecordSize {
		l.mu.Unlock() // buf is left as it was: the record is not appended
		return 0, fmt.Errorf("%w: %d bytes, the maximum is %d", ErrRecordTooLarge, size, l.cfg.maxRecordSize)
	}
	putFrameHeader(f, RecordKind, seq)
	l.buf = buf
	l.last.Store(seq)
	l.bufCount++
	l.recordBytes += len(f) - frameHeaderSize
	if f[frameHeaderSize] == recordVersionProduced { // see isProduced
		l.bufProduced = true
	}
	full, wake := l.pressureLocked()
	l.mu.Unlock()
	return l.appended(seq, full, wake)
}

// recordFixedBound bounds the bytes of a worklease.Record's binary form
// other than its strings' contents, for a record without the producers'
// fields: 2 single bytes (the version and the kind), 8 for the token's
// instance and 15 varints (the field bits, the two strings' lengths,
// Offset, Attempt, the token's fence and domain serial, two for each time,
// which take 8 bytes or two varints, Retries and Fence), each at most
// binary.MaxVarintLen64 bytes. MinMaxRecordSize rests on it. It must
// follow worklease's codec.go; TestRecordFixedBound checks it.
const recordFixedBound = 2 + 8 + 15*binary.MaxVarintLen64

// MaxRecordSize returns the largest record the Log takes (see
// WithMaxRecordSize). worklease.New reads it to check that the records of
// its largest payloads fit.
func (l *Log) MaxRecordSize() int { return l.cfg.maxRecordSize }

// ReplayRecords implements worklease.Journal with Replay, decoding each
// record of kind RecordKind. A record of another kind, or one that does not
// decode, is an error. It runs once per Log: a second call returns ErrInUse
// and calls nothing, so that a second worklease.New on a Log that already
// serves a Manager fails (and leaves the Log open). On a closed Log, such
// as one a failed worklease.New closed, it returns ErrClosed. Replay itself
// may run any number of times.
func (l *Log) ReplayRecords(restore func(snapshot []byte) error, apply func(seq uint64, rec worklease.Record) error) error {
	l.flush.Lock()
	closing := l.flush.closing
	l.flush.Unlock()
	if closing {
		return ErrClosed
	}
	if l.replayedRecords.Swap(true) {
		return ErrInUse
	}
	return l.Replay(
		func(_ uint64, data []byte) error { return restore(data) },
		func(seq uint64, kind uint8, payload []byte) error {
			if kind != RecordKind {
				return fmt.Errorf("wal: record %d has kind %d, not a worklease record", seq, kind)
			}
			var rec worklease.Record
			if err := rec.UnmarshalBinary(payload); err != nil {
				return fmt.Errorf("wal: record %d: %w", seq, err)
			}
			return apply(seq, rec)
		})
}

// SnapshotState implements worklease.Journal with WriteSnapshot, covering
// every record appended so far. With nothing new since the last snapshot it
// does nothing. On a read-only Log it returns ErrReadOnly.
func (l *Log) SnapshotState(write func(w io.Writer) error) error {
	return l.snapshotState(write, nil)
}

// snapshotState is SnapshotState; kept is writeSnapshot's.
func (l *Log) snapshotState(write func(w io.Writer) error, kept map[uint64]bool) error {
	if l.cfg.readOnly {
		return ErrReadOnly
	}
	// Counting restarts now, whatever happens, so that a snapshot that
	// fails is not retried on every call, only after as many bytes again.
	l.sinceSnapshot.Store(0)
	last := l.last.Load()
	l.flush.Lock()
	covered := l.flush.snapSeq
	l.flush.Unlock()
	if last == 0 || last <= covered {
		return nil
	}
	return l.writeSnapshot(last, func(w io.Writer) error {
		if err := write(w); err != nil {
			return err
		}
		// The Manager's snapshot may reflect records appended after last
		// (each domain is written as it is when reached). Make them durable
		// before the snapshot can be renamed into place, so that it never
		// describes records a crash could lose.
		return l.waitFor(l.last.Load(), true)
	}, kept)
}

// SnapshotDue implements worklease.Journal: it reports that the records
// appended since the last snapshot exceed WithSnapshotEvery's threshold. It
// is always false on a read-only Log.
func (l *Log) SnapshotDue() bool {
	return !l.cfg.readOnly && l.cfg.snapshotBytes > 0 && l.sinceSnapshot.Load() >= l.cfg.snapshotBytes
}
