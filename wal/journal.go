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
// Under SyncNone, AppendRecord only queues rec, and its binary form is
// encoded when the buffer is written (by the write-behind goroutine, mostly),
// off the caller's path. It still refuses a record too large for the log
// at once, with ErrRecordTooLarge, although a Manager never writes one:
// WithMaxRecordSize accepts no limit below MinMaxRecordSize.
//
// On a read-only Log it returns ErrReadOnly. A Manager built on one (to look
// at a journal, as the worklease-wal command does) answers the calls that
// change nothing; the first call that would change something fails it closed
// with worklease.ErrJournalFailed, wrapping ErrReadOnly, and nothing is
// written. Give such a Manager a Clock that never reaches a lease's expiry,
// such as one that always returns the zero time: with a real clock, even
// Inspect revokes an expired lease, which is a change.
func (l *Log) AppendRecord(rec worklease.Record) (uint64, error) {
	if l.cfg.sync.policy == syncNone && !l.cfg.readOnly {
		if bound := recordBound(&rec); bound <= l.cfg.maxRecordSize {
			return l.queueRecord(&rec, bound)
		}
		// It may fit nonetheless: encode it to know.
	}
	var buf [256]byte // most records fit: no allocation
	payload, _ := rec.AppendBinary(buf[:0])
	seq, err := l.Append(RecordKind, payload)
	if err == nil && l.cfg.snapshotBytes > 0 {
		l.sinceSnapshot.Add(int64(len(payload)))
	}
	return seq, err
}

// recordFixedBound bounds the bytes of a worklease.Record's binary form
// other than its strings' contents, for a record without the producers'
// fields: 2 single bytes (the version and the kind), 8 for the token's
// instance and 15 varints (the field bits, the two strings' lengths,
// Offset, Attempt, the token's fence and domain serial, two for each time,
// which take 8 bytes or two varints, Retries and Fence), each at most
// binary.MaxVarintLen64 bytes. The producers' fields add at most
// producedFixedBound more, besides the key's and the payload's bytes. They
// must follow worklease's codec.go; TestRecordBound checks them.
const (
	recordFixedBound   = 2 + 8 + 15*binary.MaxVarintLen64
	producedFixedBound = 4 * binary.MaxVarintLen64 // NotBefore's two, the key's length and the payload's
)

// recordBound returns an upper bound on the size of rec's binary form: at
// most 160 bytes more than its strings (200 with the producers' fields,
// besides the payload), while the records of a cycle on a domain with a
// short name take about 30 each. It is cheap enough for AppendRecord,
// which cannot afford to encode.
func recordBound(rec *worklease.Record) int {
	n := recordFixedBound + len(rec.Domain) + len(rec.Cause)
	if rec.Payload != nil || rec.Key != "" || !rec.NotBefore.IsZero() {
		n += producedFixedBound + len(rec.Key) + len(rec.Payload)
	}
	return n
}

// MaxRecordSize returns the largest record the Log takes (see
// WithMaxRecordSize). worklease.New reads it to check that the records of
// its largest payloads fit.
func (l *Log) MaxRecordSize() int { return l.cfg.maxRecordSize }

// queueRecord is AppendRecord under SyncNone, for a record whose bound
// fits in the maximum record size: it gives rec the next sequence number
// and queues it, unencoded, behind the buffer (see Log.queue).
func (l *Log) queueRecord(rec *worklease.Record, bound int) (uint64, error) {
	l.mu.Lock()
	seq, err := l.nextSeqLocked()
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	l.last.Store(seq)
	l.queue = append(l.queue, *rec)
	// A queued record holds about as much memory as its bound says its
	// frame would, so the bound serves flushThreshold well.
	l.queueBytes += bound
	full, wake := l.pressureLocked()
	l.mu.Unlock()
	return l.appended(seq, full, wake)
}

// encodeQueueLocked encodes the queued records into buf, so that a record
// Append adds next follows them. l.mu must be held. An error is a bug, as
// for appendRecordFrames, and must fail the log.
func (l *Log) encodeQueueLocked() error {
	first := l.last.Load() - uint64(len(l.queue)) + 1
	buf, err := l.appendRecordFrames(l.buf, l.queue, first)
	if err != nil {
		return err
	}
	l.buf, l.bufCount = buf, l.bufCount+len(l.queue)
	clear(l.queue) // let go of the records' strings
	l.queue, l.queueBytes = l.queue[:0], 0
	return nil
}

// appendRecordFrames appends to dst a frame of kind RecordKind for each of
// recs, numbered from seq on, encoding each record straight into dst, and
// counts their bytes for SnapshotDue. It returns an error only if a
// record's binary form exceeds the maximum record size, which recordBound
// ruled out when the record was queued: recordBound is then wrong, and
// the caller must fail the log rather than write a frame that would make
// the log unreadable.
func (l *Log) appendRecordFrames(dst []byte, recs []worklease.Record, seq uint64) ([]byte, error) {
	var n int
	for i := range recs {
		start := len(dst)
		dst = append(dst, make([]byte, frameHeaderSize)...) // filled in by sealFrame
		dst, _ = recs[i].AppendBinary(dst)
		size := len(dst) - start - frameHeaderSize
		if size > l.cfg.maxRecordSize {
			return dst, fmt.Errorf("%w: record %d took %d bytes to encode, more than the maximum %d that recordBound promised",
				ErrRecordTooLarge, seq, size, l.cfg.maxRecordSize)
		}
		sealFrame(dst[start:], RecordKind, seq)
		seq++
		n += size
	}
	if l.cfg.snapshotBytes > 0 {
		l.sinceSnapshot.Add(int64(n))
	}
	return dst, nil
}

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
