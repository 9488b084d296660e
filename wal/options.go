package wal

import (
	"fmt"
	"io/fs"
	"time"

	"github.com/worklease/worklease"
)

// Limits and defaults for the options of Open.
const (
	// DefaultSegmentSize is the segment size used without WithSegmentSize.
	DefaultSegmentSize = 64 << 20
	// MinSegmentSize is the smallest size WithSegmentSize accepts.
	MinSegmentSize = 1 << 10

	// DefaultMaxRecordSize is the payload limit used without
	// WithMaxRecordSize: a worklease.Manager's record with a payload of
	// worklease.DefaultMaxPayload bytes fits, with room for its domain,
	// key and other fields. A Manager takes no payload larger than its
	// Log's records leave room for: give a Manager WithMaxPayload above
	// the default a Log with a limit that much higher too.
	DefaultMaxRecordSize = worklease.DefaultMaxPayload + 16<<10
	// MinMaxRecordSize is the smallest limit WithMaxRecordSize accepts:
	// the largest record a worklease.Manager writes, one whose domain has
	// worklease.MaxDomainLen bytes and whose cause has
	// worklease.MaxCauseLen, every other field at its widest. So a Log
	// never refuses a Manager's record for its size, which would fail the
	// Manager for every domain.
	MinMaxRecordSize = recordFixedBound + worklease.MaxDomainLen + worklease.MaxCauseLen
	// MaxRecordSizeLimit is the largest limit WithMaxRecordSize accepts. It
	// is part of the on-disk format (readers reject segment headers above
	// it); never lower it.
	MaxRecordSizeLimit = 64 << 20
)

// flushThreshold is how many buffered bytes make Append flush the buffer
// itself, so that a caller who never waits cannot grow it without bound.
const flushThreshold = 1 << 20

// writeBehindInterval is how often SyncNone's goroutine writes what is
// buffered to the operating system: about what a crash of the process can
// lose under SyncNone.
const writeBehindInterval = 10 * time.Millisecond

// writeBehindEarly is how many buffered bytes make Append and AppendRecord
// wake SyncNone's goroutine before its next tick, so that the goroutine,
// rather than a caller reaching flushThreshold, does the writing (and
// the CRCs) when records come faster than a tick takes them. What is left below flushThreshold is the goroutine's head start.
const writeBehindEarly = flushThreshold / 4

// writeBackBytes is how many written bytes make SyncNone's goroutine start
// their write-back to the device (see Log.startWriteBack).
const writeBackBytes = 256 << 10

// syncBehindBytes is how many written bytes SyncNone lets its active
// segment hold unsynced before a background fsync, off the writers' path:
// a rotation or a snapshot, which must fsync the segment while writers
// wait, then finds little left to sync.
const syncBehindBytes = 4 << 20

// An Option configures Open.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithSyncMode sets when appended records are written and fsynced. The
// default is SyncAlways.
func WithSyncMode(m SyncMode) Option { return optionFunc(func(c *config) { c.sync = m }) }

// WithSegmentSize sets the size in bytes at which the log starts a new
// segment file. A segment is larger only when one batch alone exceeds it. The
// default is DefaultSegmentSize; Open rejects sizes below MinSegmentSize.
func WithSegmentSize(n int64) Option { return optionFunc(func(c *config) { c.segmentSize = n }) }

// WithMaxRecordSize sets the largest payload, in bytes, that Append accepts.
// Each segment records the limit it was written with in its header, and its
// records are read back with that same limit, so changing it between runs
// never makes old records unreadable (segments written with a limit below
// today's minimum included). The default is DefaultMaxRecordSize; Open
// accepts MinMaxRecordSize to MaxRecordSizeLimit.
func WithMaxRecordSize(n int) Option { return optionFunc(func(c *config) { c.maxRecordSize = n }) }

// withFS makes the log use fsys instead of the operating system's file
// system. Tests use it to inject faults and simulate crashes.
func withFS(fsys fileSystem) Option { return optionFunc(func(c *config) { c.fs = fsys }) }

// withTicker replaces the ticker that drives the goroutine of SyncInterval
// and SyncNone. newTicker returns the tick channel and a function that stops
// it.
func withTicker(newTicker func(time.Duration) (<-chan time.Time, func())) Option {
	return optionFunc(func(c *config) { c.newTicker = newTicker })
}

// DefaultSnapshotBytes is how many bytes of records a Log used as a
// worklease.Journal takes before it asks the Manager for a snapshot, unless
// WithSnapshotEvery says otherwise.
const DefaultSnapshotBytes = 64 << 20

// WithSnapshotEvery sets how many bytes of records a Log used as a
// worklease.Journal takes before SnapshotDue asks the Manager for a snapshot,
// which then lets the log remove the segments it covers. Zero turns
// automatic snapshots off; Manager.Snapshot still takes one on demand. The
// default is DefaultSnapshotBytes; a negative n makes Open return an error.
func WithSnapshotEvery(n int64) Option {
	return optionFunc(func(c *config) { c.snapshotBytes = n })
}

// WithReadOnly makes Open inspect an existing log without changing it: for
// tools that look at a log, such as a journal's command-line inspector, or a
// copy of one on read-only storage.
//
// A read-only Open creates, truncates, renames, removes and fsyncs nothing.
// The directory and a log in it must exist: a missing directory, or one
// without segments, is an error wrapping fs.ErrNotExist. Damage is judged
// exactly as a writable Open judges it, so corruption is the same
// *CorruptionError, but nothing is repaired: a torn tail is reported in
// [Log.Recovery] and left in the file, where a writable Open would cut it, and
// temporary files and segments an interrupted snapshot left behind are listed
// in Recovery.Removed and kept. Replay, Stats, Durable and Wait (of a
// recovered sequence number) work. Append, AppendRecord, WriteSnapshot and
// SnapshotState return ErrReadOnly, SnapshotDue reports false, and Close only
// closes files. WithSyncMode, WithSegmentSize, WithMaxRecordSize and
// WithSnapshotEvery are checked but have no effect; no goroutine is started.
// A read-only Open does not refuse a directory that others may write to
// (ErrWritableByOthers): it writes nothing there, and a tool should be able
// to look at such a log, to tell what it holds before the directory is made
// private.
//
// Instead of the exclusive lock a writable Log holds, a read-only Log holds a
// shared lock on the directory's LOCK file (flock(2) LOCK_SH on Unix;
// elsewhere only within the process), so that the log cannot change under it:
// read-only Logs do not exclude each other, but a read-only Open fails with
// ErrLocked while a writable Log has the directory open, and a writable Open
// fails with ErrLocked while a read-only Log does. Keep read-only Logs
// short-lived for that reason: open, read, Close. A directory without a LOCK
// file (a copy, say) is opened without a lock, since creating one would be a
// change.
func WithReadOnly() Option { return optionFunc(func(c *config) { c.readOnly = true }) }

// WithoutLock makes a read-only Open (WithReadOnly, which it implies) take
// no lock at all, so that it reads a log that a running Manager is
// writing: the snapshot and every whole record after it, up to the last
// complete one. What it reads is a prefix of the log at some moment, which
// replays to the state the Manager had after those records, as after a
// crash: a record being written (or written and not yet fsynced) may be
// in it or not, and a call whose records are not all in it appears not to
// have happened, or to have happened in part, as its records were
// applied one at a time. The log it reads goes on changing: a later Open
// reads a later prefix. If the Manager writes a snapshot and removes the
// segments it covers while Open reads them, Open reads the directory again,
// up to five times in all, before it returns the error.
func WithoutLock() Option {
	return optionFunc(func(c *config) { c.readOnly, c.noLock = true, true })
}

// WithGroupAccess lets the group of the log's directory read the log: Open
// creates the directory (and any parent it creates) with mode 0750 and
// every file with mode 0640, instead of the private 0700 and 0600 of the
// default, before the umask. Use it when a tool run under another account
// of the group, such as a backup, reads the journal. It does not change
// the modes of a directory or files that exist: a log created with other
// modes keeps them (chmod them to change them). No mode ever lets others
// than the owner write.
func WithGroupAccess() Option {
	return optionFunc(func(c *config) { c.dirPerm, c.filePerm = 0o750, 0o640 })
}

type config struct {
	readOnly      bool
	noLock        bool        // with readOnly: take no lock (WithoutLock)
	dirPerm       fs.FileMode // the mode Open creates directories with, before the umask
	filePerm      fs.FileMode // the mode the Log creates files with, before the umask
	sync          SyncMode
	segmentSize   int64
	maxRecordSize int
	snapshotBytes int64
	fs            fileSystem
	newTicker     func(time.Duration) (<-chan time.Time, func())
}

func defaultConfig() config {
	return config{
		sync:          SyncAlways,
		dirPerm:       0o700,
		filePerm:      0o600,
		segmentSize:   DefaultSegmentSize,
		maxRecordSize: DefaultMaxRecordSize,
		snapshotBytes: DefaultSnapshotBytes,
		fs:            osFS{},
		newTicker: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
	}
}

func (c *config) validate() error {
	switch {
	case c.sync.policy == syncInvalid || c.sync.policy > syncNone:
		return fmt.Errorf("%w: sync mode %v", ErrInvalidConfig, c.sync)
	case c.sync.policy == syncInterval && c.sync.interval <= 0:
		return fmt.Errorf("%w: %v: the interval must be positive", ErrInvalidConfig, c.sync)
	case c.segmentSize < MinSegmentSize:
		return fmt.Errorf("%w: segment size %d is below the minimum %d", ErrInvalidConfig, c.segmentSize, MinSegmentSize)
	case c.maxRecordSize < MinMaxRecordSize || c.maxRecordSize > MaxRecordSizeLimit:
		return fmt.Errorf("%w: max record size %d is outside %d to %d", ErrInvalidConfig, c.maxRecordSize, MinMaxRecordSize, MaxRecordSizeLimit)
	case c.snapshotBytes < 0:
		return fmt.Errorf("%w: snapshot threshold %d is negative", ErrInvalidConfig, c.snapshotBytes)
	case c.fs == nil || c.newTicker == nil:
		return fmt.Errorf("%w: nil file system or ticker", ErrInvalidConfig)
	}
	return nil
}

// A SyncMode says when the log writes appended records to the operating
// system and when it fsyncs them, and so what a crash can lose. The modes are
// a ladder of guarantees, each cheaper than the one above: SyncAlways
// acknowledges a record (Wait returns) once it is fsynced, SyncInterval once
// it is written to the operating system, SyncNone once it is appended. The
// zero SyncMode is invalid; use SyncAlways, SyncInterval or SyncNone.
//
// A crash of the process alone keeps what was written to the operating
// system; a crash of the machine (or of the operating system, or a power
// loss) keeps only what was fsynced. So:
//
//	mode             Wait returns once    a process crash loses      a machine crash loses
//	SyncAlways       fsynced              nothing acknowledged       nothing acknowledged
//	SyncInterval(d)  written              nothing acknowledged       about the last d
//	SyncNone         appended             about the last 10ms        everything since the last fsync
//
// Whatever the mode, the log writes and fsyncs a segment before starting the
// next one, everything up to seq before WriteSnapshot(seq, …) writes its
// snapshot, and everything on Close; and Append writes the buffer itself
// once a megabyte is buffered. A record that a crash loses is lost together
// with every record after it: recovery yields a prefix of the appended
// records, never one with a gap, and never a record that was not appended.
type SyncMode struct {
	policy   syncPolicy
	interval time.Duration
}

type syncPolicy uint8

const (
	syncInvalid syncPolicy = iota
	syncAlways
	syncInterval
	syncNone
)

var (
	// SyncAlways makes Wait return only once the record is fsynced: a
	// record Wait acknowledged survives a crash of the process and of the
	// machine. Concurrent waiters share each write and fsync (group commit).
	// It is the default.
	SyncAlways = SyncMode{policy: syncAlways}

	// SyncNone makes Wait do no I/O: it returns as soon as the record is
	// appended, after the same checks as in the other modes (the sequence
	// number was appended, the log has not failed). A background goroutine,
	// which Close stops, writes whatever is buffered to the operating system
	// every 10ms, or sooner once a quarter of a megabyte is buffered, without
	// an fsync, and so do Append once a megabyte is buffered, WriteSnapshot
	// and Close (which also fsyncs). A record's CRC is left to whoever
	// writes it, mostly that goroutine. A second one fsyncs in the
	// background once 4 MiB are written and not synced, while the first
	// goes on writing: a new segment or a snapshot, which must fsync the
	// log first, then finds little to sync. On Linux (amd64 and
	// arm64), the second also has the kernel start writing each quarter of
	// a megabyte written to the disk, without waiting (sync_file_range), so
	// that the fsyncs find little left to write and end soon. A crash of the
	// process loses the records of about the last 10ms, acknowledged or
	// not; a crash of the machine loses every record since the last fsync,
	// at most about 4 MiB of them unless the disk falls behind. It is like
	// PostgreSQL's
	// synchronous_commit=off: for callers who can redo the work of the
	// last moments before a crash, and want Wait to cost next to nothing.
	SyncNone = SyncMode{policy: syncNone}
)

// SyncInterval makes Wait return once the record is written to the operating
// system, and a background goroutine flush and fsync the log every d, until
// Close stops it. A crash of the process loses nothing Wait acknowledged; a
// crash of the machine can lose the records of the last d or so. Open rejects
// d <= 0.
func SyncInterval(d time.Duration) SyncMode { return SyncMode{policy: syncInterval, interval: d} }

// String returns the mode's name as it is written in Go, such as
// "SyncInterval(10ms)".
func (m SyncMode) String() string {
	switch m.policy {
	case syncAlways:
		return "SyncAlways"
	case syncInterval:
		return fmt.Sprintf("SyncInterval(%v)", m.interval)
	case syncNone:
		return "SyncNone"
	default:
		return "SyncMode(invalid)"
	}
}
