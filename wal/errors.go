package wal

import (
	"errors"
	"fmt"
	"strings"

	"github.com/worklease/worklease"
)

// Errors returned by Open.
var (
	// ErrInvalidConfig is returned by Open when an option is out of range.
	ErrInvalidConfig = errors.New("wal: invalid configuration")

	// ErrLocked is returned by Open when another Log, in this process or in
	// another one, has the directory open.
	ErrLocked = errors.New("wal: directory is in use by another Log")

	// ErrCorrupt is matched by every [*CorruptionError]: committed data that
	// cannot be read back, or records missing from the middle of the log.
	ErrCorrupt = errors.New("wal: corrupt log")

	// ErrUnsupportedVersion is returned by Open when a segment or snapshot
	// carries a valid header with a format version this package cannot read.
	ErrUnsupportedVersion = errors.New("wal: unsupported format version")
)

// Reasons why a record or file could not be read. The Reason of a
// [*CorruptionError], and of a [TornTail] reported by [Log.Recovery], wraps
// one of them. The first three follow pebble's record package: they tell a
// tail that was never written completely from damage to written data, once the
// position of the damage is compared with what the log knows was synced.
var (
	// ErrZeroedRecord reports a record header made only of zero bytes, as
	// left by a file system that extended a file without writing its data.
	ErrZeroedRecord = errors.New("wal: zeroed record")

	// ErrInvalidRecord reports a record with a bad checksum, a length above
	// the maximum record size, a reserved kind, an out-of-order sequence
	// number or a malformed commit marker.
	ErrInvalidRecord = errors.New("wal: invalid record")

	// ErrUnexpectedEOF reports a file that ends inside a record.
	ErrUnexpectedEOF = errors.New("wal: unexpected EOF")

	// ErrUncommitted reports records that are not followed by the commit
	// marker closing their batch.
	ErrUncommitted = errors.New("wal: batch without commit marker")

	// ErrBadHeader reports a segment or snapshot whose header is damaged or
	// does not match the file's name or place in the log.
	ErrBadHeader = errors.New("wal: bad file header")

	// ErrMissingSegment reports records that are in neither the snapshot nor
	// a segment: a segment is missing, or segments are missing before the
	// first one left.
	ErrMissingSegment = errors.New("wal: missing segment")
)

// Errors returned by Append, Wait, WriteSnapshot, Replay and Close.
var (
	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("wal: log closed")

	// ErrFailed is wrapped, together with its cause, by the error of the
	// write, fsync or directory operation that failed and by every later call:
	// the log fails closed. Close it, then Open the directory again to recover
	// what was made durable.
	ErrFailed = errors.New("wal: log failed")

	// ErrInvalidKind is returned by Append for a kind outside MinKind to
	// MaxKind.
	ErrInvalidKind = errors.New("wal: invalid record kind")

	// ErrRecordTooLarge is returned by Append for a payload longer than the
	// maximum record size.
	ErrRecordTooLarge = errors.New("wal: record too large")

	// ErrInvalidSeq is returned by Wait for a sequence number that was never
	// appended, and by WriteSnapshot for one that was never appended or is
	// older than the current snapshot.
	ErrInvalidSeq = errors.New("wal: invalid sequence number")

	// ErrSnapshotInProgress is returned by WriteSnapshot while another
	// WriteSnapshot is running.
	ErrSnapshotInProgress = errors.New("wal: snapshot already in progress")

	// ErrReadOnly is returned by Append, AppendRecord, WriteSnapshot and
	// SnapshotState on a Log opened WithReadOnly.
	ErrReadOnly = errors.New("wal: log opened read-only")

	// ErrWritableByOthers is returned by Open when the log's directory may
	// be written by users other than its owner and group (its mode has the
	// o+w bit), who could then replace or remove the log's files. Open
	// creates and changes nothing then. Make the directory private (chmod
	// o-w, or chmod 700) and open it again. A read-only Open, which writes
	// nothing, does not check; neither does Open on Windows, whose
	// directories have no such bit.
	ErrWritableByOthers = errors.New("wal: log directory is writable by others")

	// ErrInUse is returned by ReplayRecords when it was called before on
	// the Log: a Log serves one worklease.Manager, which replays it once, in
	// New, so a second New on the same Log fails with it. It matches
	// worklease.ErrJournalInUse under errors.Is too.
	ErrInUse = fmt.Errorf("wal: log already serves a Manager: %w", worklease.ErrJournalInUse)
)

// A CorruptionError reports committed data that Open or Replay cannot read
// back: a damaged record followed by data known to have been synced, a damaged
// sealed segment or snapshot, or records missing from the log. It matches
// [ErrCorrupt] under errors.Is, and unwraps to its Reason.
type CorruptionError struct {
	File   string // base name of the damaged segment or snapshot file
	Offset int64  // byte offset in File of the damaged record or header
	Reason error  // wraps one of ErrZeroedRecord, ErrInvalidRecord, ErrUnexpectedEOF, ErrUncommitted, ErrBadHeader or ErrMissingSegment
}

// Error describes the damage, naming the file and byte offset.
func (e *CorruptionError) Error() string {
	reason := "unknown reason"
	if e.Reason != nil {
		reason = strings.TrimPrefix(e.Reason.Error(), "wal: ")
	}
	return fmt.Sprintf("wal: corrupt log: %s at offset %d: %s", e.File, e.Offset, reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns e.Reason.
func (e *CorruptionError) Unwrap() error { return e.Reason }

// corrupt builds a *CorruptionError whose Reason wraps reason with detail.
func corrupt(file string, offset int64, reason error, format string, args ...any) *CorruptionError {
	return &CorruptionError{File: file, Offset: offset, Reason: reasonf(reason, format, args...)}
}

// reasonf wraps the sentinel reason with a formatted detail.
func reasonf(reason error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", reason, fmt.Sprintf(format, args...))
}

// isRecordError reports whether err classifies bad bytes, rather than an I/O
// failure.
func isRecordError(err error) bool {
	return errors.Is(err, ErrZeroedRecord) || errors.Is(err, ErrInvalidRecord) ||
		errors.Is(err, ErrUnexpectedEOF) || errors.Is(err, ErrUncommitted)
}
