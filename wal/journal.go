package wal

import (
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
// as a record of kind RecordKind.
//
// On a read-only Log it returns ErrReadOnly. A Manager built on one (to look
// at a journal, as the worklease-wal command does) answers the calls that
// change nothing; the first call that would change something fails it closed
// with worklease.ErrJournalFailed, wrapping ErrReadOnly, and nothing is
// written. Give such a Manager a Clock that never reaches a lease's expiry,
// such as one that always returns the zero time: with a real clock, even
// Inspect revokes an expired lease, which is a change.
func (l *Log) AppendRecord(rec worklease.Record) (uint64, error) {
	var buf [256]byte // most records fit: no allocation
	payload, _ := rec.AppendBinary(buf[:0])
	seq, err := l.Append(RecordKind, payload)
	if err == nil && l.cfg.snapshotBytes > 0 {
		l.sinceSnapshot.Add(int64(len(payload)))
	}
	return seq, err
}

// ReplayRecords implements worklease.Journal with Replay, decoding each
// record of kind RecordKind. A record of another kind, or one that does not
// decode, is an error.
func (l *Log) ReplayRecords(restore func(snapshot []byte) error, apply func(seq uint64, rec worklease.Record) error) error {
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
	return l.WriteSnapshot(last, func(w io.Writer) error {
		if err := write(w); err != nil {
			return err
		}
		// The Manager's snapshot may reflect records appended after last
		// (each domain is written as it is when reached). Make them durable
		// before the snapshot can be renamed into place, so that it never
		// describes records a crash could lose.
		return l.waitFor(l.last.Load(), true)
	})
}

// SnapshotDue implements worklease.Journal: it reports that the records
// appended since the last snapshot exceed WithSnapshotEvery's threshold. It
// is always false on a read-only Log.
func (l *Log) SnapshotDue() bool {
	return !l.cfg.readOnly && l.cfg.snapshotBytes > 0 && l.sinceSnapshot.Load() >= l.cfg.snapshotBytes
}
