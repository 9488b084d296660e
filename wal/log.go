package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A Log is an open write-ahead log: one directory of segment files and an
// optional snapshot, written by this Log alone. Use [Open]; the zero Log is
// not usable. A Log is safe for concurrent use.
//
// Lock order: l.mu and l.flush.Mutex are never held together; a goroutine
// releases one before it takes the other. Neither is held while the Log
// writes, syncs or calls a caller's function.
type Log struct {
	dir      string
	fs       fileSystem
	cfg      config
	lock     io.Closer // the directory lock, released by Close
	recovery Recovery  // what Open found; never changes afterwards

	failure atomic.Pointer[failure] // set once by fail, never cleared: the log failed closed
	batches atomic.Uint64           // batches written since Open
	// replayedRecords: ReplayRecords ran, for a Manager that now owns the Log.
	replayedRecords atomic.Bool
	syncs           atomic.Uint64 // file fsyncs since Open

	// sinceSnapshot counts the bytes of records appended through
	// AppendRecord since the last snapshot was started, for SnapshotDue.
	// A record is counted when it is written (under SyncNone, within about
	// 10ms); those a snapshot's own write writes count towards the next
	// snapshot, although it covers them.
	sinceSnapshot atomic.Int64

	mu sync.Mutex // guards the append buffer: the fields up to flush
	// buf holds the frames appended and not yet taken by a flush leader,
	// without their CRC, which the leader fills in (see putFrameCRCs).
	buf         []byte
	bufCount    int // records in buf
	recordBytes int // bytes of the records AppendRecord put in buf, for sinceSnapshot
	// bufProduced: buf holds a record with producers' fields, for the
	// index; a batch without one is not searched for them.
	bufProduced bool
	woken       bool // SyncNone's goroutine was woken early for what is buffered now
	closed      bool // Close has begun: Append refuses new records
	// last is the sequence number of the last record appended, 0 before
	// the first. It is stored only under mu, in step with buf,
	// and loaded without it by those who need no more than the number
	// (Wait, Durable, Stats).
	last atomic.Uint64

	flush struct {
		sync.Mutex              // guards the fields of flush
		cond         sync.Cond  // L is &flush.Mutex; broadcast when busy, syncing, written, synced or snapshotting change
		busy         bool       // a flush leader is writing; it alone uses l.w
		syncing      bool       // a goroutine is fsyncing target.seg (see waitFor)
		target       syncTarget // what the last batch left to fsync
		written      uint64     // every record up to written is in the operating system
		synced       uint64     // every record up to synced is fsynced
		segments     []segment  // the segment files, oldest first; the last is being written
		kept         []segment  // segments the snapshot covers and keeps for records it refers to, oldest first (see SnapshotStateKeeping)
		snapSeq      uint64     // sequence number the snapshot file covers; 0 when there is none
		snapshotting bool       // a WriteSnapshot is running
		replaying    int        // Replays running; segments are not removed while any is
		closing      bool       // Close has begun: no new snapshot or replay
		closed       bool       // the active segment is closed: no more flushes
	}

	// w is the writer's state. It belongs to the goroutine that set
	// flush.busy (the flush leader), and to Open and Close when no flush can
	// run; flush.busy changes under flush.Mutex, which orders the handovers.
	w struct {
		seg     *activeSegment // the segment being written
		spare   []byte         // the buffer to hand Append next
		written uint64         // last record written
		synced  uint64         // last record fsynced
	}

	// index locates the Manager's records that hold payloads, for
	// ReadPayload; it has a lock of its own, never held with the others.
	index recordIndex

	stopSync chan struct{} // closed by Close to stop the SyncInterval or SyncNone goroutines
	syncDone chan struct{} // closed by syncLoop when it returns
	// SyncNone's second goroutine, syncBehind, starts the write-back of
	// what the first wrote and fsyncs it once syncBehindBytes are unsynced;
	// nil otherwise.
	kickSync       chan struct{} // wakes syncBehind
	syncBehindDone chan struct{} // closed by syncBehind when it returns
	wake           chan struct{} // SyncNone: wakes its goroutine before the next tick (see writeBehindEarly); nil otherwise
	// writeBack is how far syncBehind has started the write-back of a
	// segment (see startWriteBack). Only that goroutine uses it.
	writeBack struct {
		seg  *activeSegment
		upTo int64
	}
}

// failure wraps the error that failed the log.
type failure struct{ err error }

// A syncTarget is what an fsync makes durable: the segment the last batch
// went to, up to where it ended.
type syncTarget struct {
	seg  *activeSegment
	size int64  // the segment's size after the batch
	seq  uint64 // the batch's last record
}

// A segment is one segment file as the log tracks it.
type segment struct {
	id       uint64
	firstSeq uint64 // sequence number of its first record, if it has one
	size     int64  // bytes of whole committed batches, header included
}

// An activeSegment is the segment the flush leader writes to.
type activeSegment struct {
	id     uint64
	name   string
	f      file
	size   int64 // bytes written; the flush leader's
	synced int64 // bytes known to be fsynced; changed under flush's lock, or by the leader while no fsync runs
}

// Recovery reports what Open found in the directory and what it repaired.
type Recovery struct {
	// Created is true when the directory held no log and Open created one.
	Created bool
	// SnapshotSeq is the sequence number the recovered snapshot covers, or 0
	// when there is no snapshot.
	SnapshotSeq uint64
	// LastSeq is the highest sequence number recovered, in the snapshot or a
	// record; the next Append returns LastSeq+1.
	LastSeq uint64
	// Segments is the number of segment files after recovery.
	Segments int
	// Torn describes the tail Open cut from the last segment, or is nil when
	// the log ended with a whole committed batch.
	Torn *TornTail
	// Removed lists the files Open deleted: temporary files left by an
	// interrupted segment or snapshot creation, and segments wholly covered
	// by the snapshot (the one being written when a snapshot was taken is
	// kept until the next snapshot or Open, and so is any an interrupted
	// WriteSnapshot left behind).
	Removed []string
	// ReadOnly is true when the log was opened WithReadOnly. Open then
	// repaired nothing: Torn describes the tail a writable Open would cut,
	// which is still in the file, and Removed lists the files a writable
	// Open would delete, which are still there.
	ReadOnly bool
}

// A TornTail is the end of the last segment that held no whole committed
// batch: a write a crash interrupted. Open cuts it off and reports it here;
// a read-only Open only reports it.
type TornTail struct {
	File   string // base name of the segment
	Offset int64  // where the segment was cut: the end of its last committed batch
	Bytes  int64  // how many bytes were cut
	Reason error  // wraps ErrZeroedRecord, ErrInvalidRecord, ErrUnexpectedEOF or ErrUncommitted
}

// Stats is a snapshot of a Log's counters, for monitoring and for deciding
// when to write a snapshot.
type Stats struct {
	LastSeq              uint64 // highest sequence number appended or recovered
	Written              uint64 // highest sequence number written to the operating system
	Synced               uint64 // highest sequence number fsynced
	SnapshotSeq          uint64 // sequence number the snapshot covers; 0 when there is none
	RecordsSinceSnapshot uint64 // LastSeq - SnapshotSeq: records a replay would read
	Segments             int    // segment files, those the snapshot keeps for the payloads it refers to included
	LogBytes             int64  // bytes in the segment files; snapshots let the log remove them, but for those they keep
	Batches              uint64 // batches written since Open: each one write and at most one fsync
	Syncs                uint64 // file fsyncs since Open, for segments and snapshots
}

// Open opens the log in dir, creating the directory (mode 0700 by default;
// see WithGroupAccess) and an empty log if there is none, and takes the
// directory's lock: a second Open of the same
// directory, from this process or (on Unix, where the lock is flock) another,
// fails with an error wrapping ErrLocked until Close.
//
// Open recovers the log before it returns. It removes temporary files left by
// an interrupted segment or snapshot creation. It cuts a torn tail (a partial
// record, zeroed or invalid bytes, or a batch without its commit marker at the
// end of the last segment) back to the end of the last committed batch, and
// reports it in [Log.Recovery]. Damage that is followed by data known to be
// synced, damage to any other segment or to the snapshot, and records missing
// from the log are corruption: Open returns a [*CorruptionError] naming the
// file and offset, and cuts nothing off. Before returning, Open fsyncs the
// last segment and the directory, so what it recovered survives a crash. No
// bytes in the directory make Open panic or allocate much more than the
// largest file holds.
//
// Open returns an error wrapping [ErrWritableByOthers], and creates nothing,
// if others may write to dir (see Permissions in the package documentation).
//
// With [WithReadOnly], Open takes a shared lock instead, creates and repairs
// nothing, and fails if there is no log in dir; see WithReadOnly.
func Open(dir string, opts ...Option) (*Log, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.noLock {
		return openLive(dir, cfg)
	}
	fsys := cfg.fs
	var lock io.Closer
	var err error
	if cfg.readOnly {
		lock, err = lockShared(fsys, dir)
	} else if err = makeDir(fsys, dir, cfg.dirPerm); err == nil {
		if err = checkDirMode(fsys, dir); err == nil {
			if lock, err = fsys.Lock(filepath.Join(dir, lockName), cfg.filePerm); err != nil {
				err = fmt.Errorf("wal: lock %s: %w", dir, err)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, fs: fsys, cfg: cfg, lock: lock}
	l.flush.cond.L = &l.flush.Mutex
	if err := l.recover(); err != nil {
		if l.w.seg != nil {
			_ = l.w.seg.f.Close()
		}
		_ = lock.Close()
		return nil, err
	}
	if !cfg.readOnly && cfg.sync.policy != syncAlways {
		// SyncInterval's goroutine writes and fsyncs every interval;
		// SyncNone's only writes, every writeBehindInterval.
		interval, fsync := cfg.sync.interval, true
		if cfg.sync.policy == syncNone {
			interval, fsync = writeBehindInterval, false
			l.wake = make(chan struct{}, 1)
		}
		tick, stop := cfg.newTicker(interval)
		l.stopSync = make(chan struct{})
		l.syncDone = make(chan struct{})
		if !fsync {
			l.kickSync = make(chan struct{}, 1)
			l.syncBehindDone = make(chan struct{})
			go l.syncBehind()
		}
		go l.syncLoop(tick, l.wake, stop, fsync)
	}
	return l, nil
}

// openLive is Open WithoutLock: a read-only Open that takes no lock, and
// tries again, up to five times in all, if a snapshot the writer took
// meanwhile removed a file it was reading.
func openLive(dir string, cfg config) (*Log, error) {
	var err error
	for range 5 {
		if _, err = cfg.fs.ReadDir(dir); err != nil {
			return nil, fmt.Errorf("wal: open %s: %w", dir, err)
		}
		l := &Log{dir: dir, fs: cfg.fs, cfg: cfg, lock: noLock{}}
		l.flush.cond.L = &l.flush.Mutex
		if err = l.recover(); err == nil {
			return l, nil
		}
	}
	return nil, err
}

// lockShared checks that dir exists and takes its shared lock for a read-only
// Log: none if the file system has no shared locks or dir has no LOCK file,
// which a read-only Log must not create.
func lockShared(fsys fileSystem, dir string) (io.Closer, error) {
	if _, err := fsys.ReadDir(dir); err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	sl, ok := fsys.(sharedLocker)
	if !ok {
		return noLock{}, nil
	}
	lock, err := sl.LockShared(filepath.Join(dir, lockName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return noLock{}, nil
	case err != nil:
		return nil, fmt.Errorf("wal: lock %s: %w", dir, err)
	}
	return lock, nil
}

// noLock is the lock of a read-only Log that could take none.
type noLock struct{}

func (noLock) Close() error { return nil }

// checkDirMode returns an error wrapping ErrWritableByOthers if other users
// may write to dir.
func checkDirMode(fsys fileSystem, dir string) error {
	dm, ok := fsys.(dirModer)
	if !ok {
		return nil
	}
	perm, ok, err := dm.DirMode(dir)
	switch {
	case err != nil:
		return fmt.Errorf("wal: open %s: %w", dir, err)
	case ok && perm&0o002 != 0:
		return fmt.Errorf("%w: %s has mode %v: make it private with chmod o-w (or chmod 700), then open it again",
			ErrWritableByOthers, dir, perm)
	}
	return nil
}

// makeDir creates dir and its missing parents with permission bits perm, and
// fsyncs the directory holding each one it created, so that the log's
// directory outlives a crash.
func makeDir(fsys fileSystem, dir string, perm fs.FileMode) error {
	var missing []string // dir and its missing parents, deepest first
	for d := dir; ; d = filepath.Dir(d) {
		_, err := fsys.ReadDir(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("wal: open %s: %w", d, err)
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("wal: create %s: %w", dir, err)
	}
	for _, d := range missing {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return fmt.Errorf("wal: sync the parent of %s: %w", d, err)
		}
	}
	return nil
}

// Recovery returns what Open found and repaired.
func (l *Log) Recovery() Recovery {
	r := l.recovery
	r.Removed = slices.Clone(r.Removed)
	return r
}

// Append adds a record of the given kind to the log's buffer and returns its
// sequence number: 1 for the first record of a new log, then one more for
// each record, in the order the records are written. Append copies payload.
// It does not wait for the record to be durable; call Wait for that.
//
// Append does no I/O unless a megabyte or more is buffered, when it writes
// the buffer itself (as Wait would under SyncAlways or SyncInterval) to bound
// the memory of callers that never wait, or that wait under SyncNone. It
// returns an error wrapping ErrInvalidKind or ErrRecordTooLarge without
// changing the log, ErrClosed after Close, the failure after the log failed
// (see ErrFailed), and ErrReadOnly if the log was opened WithReadOnly.
func (l *Log) Append(kind uint8, payload []byte) (uint64, error) {
	if l.cfg.readOnly {
		return 0, ErrReadOnly
	}
	if kind < MinKind || kind > MaxKind {
		return 0, fmt.Errorf("%w: %d is outside %d to %d", ErrInvalidKind, kind, MinKind, MaxKind)
	}
	if len(payload) > l.cfg.maxRecordSize {
		return 0, fmt.Errorf("%w: %d bytes, the maximum is %d", ErrRecordTooLarge, len(payload), l.cfg.maxRecordSize)
	}
	l.mu.Lock()
	seq, err := l.nextSeqLocked()
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	l.last.Store(seq)
	l.buf = appendFrameNoCRC(l.buf, kind, seq, payload)
	l.bufCount++
	l.bufProduced = l.bufProduced || isProduced(kind, payload)
	full, wake := l.pressureLocked()
	l.mu.Unlock()
	return l.appended(seq, full, wake)
}

// nextSeqLocked returns the sequence number the next record gets, or the
// error that refuses it. l.mu must be held.
func (l *Log) nextSeqLocked() (uint64, error) {
	if f := l.failure.Load(); f != nil {
		return 0, f.err
	}
	if l.closed {
		return 0, ErrClosed
	}
	return l.last.Load() + 1, nil
}

// pressureLocked reports what the bytes buffered ask of the caller that
// just appended: to write the buffer itself (full), at flushThreshold, and
// under SyncNone to wake the write-behind goroutine (wake), once per
// buffer, at writeBehindEarly. l.mu must be held.
func (l *Log) pressureLocked() (full, wake bool) {
	n := len(l.buf)
	if l.wake != nil && !l.woken && n >= writeBehindEarly {
		l.woken, wake = true, true
	}
	return n >= flushThreshold, wake
}

// appended ends the append of record seq, doing what pressureLocked asked.
// It is small enough to inline: most appends are asked nothing.
func (l *Log) appended(seq uint64, full, wake bool) (uint64, error) {
	if full || wake {
		return l.relieve(seq, full, wake)
	}
	return seq, nil
}

// relieve is appended for an append asked to wake the write-behind
// goroutine or to write the buffer. A full buffer is written as a Wait
// under SyncInterval would write it, so that callers who never wait cannot
// grow it without bound.
func (l *Log) relieve(seq uint64, full, wake bool) (uint64, error) {
	if wake {
		select {
		case l.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	if full {
		if err := l.waitFor(seq, false); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// Wait returns once the record seq, and every record before it, is durable in
// the sense of the log's SyncMode: fsynced under SyncAlways, written to the
// operating system under SyncInterval. Many goroutines may wait at once; they
// share the writes and fsyncs (group commit). Under SyncNone, Wait does no
// I/O and returns at once: the record is appended, and the write-behind
// goroutine writes it within about 10ms (see SyncNone).
//
// Wait returns an error wrapping ErrInvalidSeq if seq was never appended, and
// the failure if the log failed, even for records that were durable before.
// Wait(0) returns at once.
func (l *Log) Wait(seq uint64) error {
	if last := l.last.Load(); seq > last {
		return fmt.Errorf("%w: %d was never appended; the last is %d", ErrInvalidSeq, seq, last)
	}
	switch l.cfg.sync.policy {
	case syncNone:
		if f := l.failure.Load(); f != nil {
			return f.err
		}
		return nil
	case syncAlways:
		return l.waitFor(seq, true)
	default:
		return l.waitFor(seq, false)
	}
}

// Durable returns the highest sequence number for which Wait returns without
// writing: the last record fsynced under SyncAlways, the last written to the
// operating system under SyncInterval, and the last appended under SyncNone,
// whose Wait never writes. Stats tells how far SyncNone's write-behind has
// got (Written) and what is fsynced (Synced).
func (l *Log) Durable() uint64 {
	if l.cfg.sync.policy == syncNone {
		return l.last.Load()
	}
	l.flush.Lock()
	defer l.flush.Unlock()
	if l.cfg.sync.policy == syncAlways {
		return l.flush.synced
	}
	return l.flush.written
}

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	last := l.last.Load()
	l.flush.Lock()
	defer l.flush.Unlock()
	s := Stats{
		LastSeq:     last,
		Written:     l.flush.written,
		Synced:      l.flush.synced,
		SnapshotSeq: l.flush.snapSeq,
		Segments:    len(l.flush.segments) + len(l.flush.kept),
		Batches:     l.batches.Load(),
		Syncs:       l.syncs.Load(),
	}
	if last > s.SnapshotSeq {
		s.RecordsSinceSnapshot = last - s.SnapshotSeq
	}
	for _, seg := range l.flush.segments {
		s.LogBytes += seg.size
	}
	for _, seg := range l.flush.kept {
		s.LogBytes += seg.size
	}
	return s
}

// Close writes and fsyncs every appended record, stops the SyncInterval or
// SyncNone goroutine, closes the files and releases the directory's lock. It
// waits for a WriteSnapshot in progress. After a failure it fsyncs nothing
// and returns the failure. Close returns nil when called again. On a
// read-only Log it writes and fsyncs nothing.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	last := l.last.Load()
	l.mu.Unlock()

	l.flush.Lock()
	l.flush.closing = true
	l.flush.Unlock()
	if l.stopSync != nil {
		close(l.stopSync)
		<-l.syncDone
		if l.syncBehindDone != nil {
			<-l.syncBehindDone
		}
	}
	err := l.waitFor(last, true)

	l.flush.Lock()
	for l.flush.busy || l.flush.syncing || l.flush.snapshotting {
		l.flush.cond.Wait()
	}
	l.flush.closed = true
	l.flush.Unlock()
	// No flush can start now, so l.w is ours. A read-only Log has no
	// active segment.
	if l.w.seg != nil {
		if cerr := l.w.seg.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("wal: close %s: %w", l.w.seg.name, cerr)
		}
	}
	l.index.closeAll()
	if cerr := l.lock.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("wal: unlock %s: %w", l.dir, cerr)
	}
	return err
}

// fail makes the log fail closed with cause, unless it already failed, and
// returns the failure. Callers broadcast flush.cond afterwards so that
// waiters see it.
func (l *Log) fail(cause error) error {
	f := &failure{err: fmt.Errorf("%w: %w", ErrFailed, cause)}
	if !l.failure.CompareAndSwap(nil, f) {
		f = l.failure.Load()
	}
	return f.err
}

// failAndWake fails the log with cause, unless it already failed, wakes the
// waiters to see it, and returns the failure.
func (l *Log) failAndWake(cause error) error {
	err := l.fail(cause)
	l.flush.Lock()
	l.flush.cond.Broadcast()
	l.flush.Unlock()
	return err
}

// waitFor returns once every record up to seq is written to the operating
// system and, if sync, fsynced. Writing and fsyncing are two roles, each
// held by one goroutine at a time, so that a slow fsync never holds up the
// next write:
//
//   - The first waiter whose record is not written and finds no write
//     running (nor, if it needs an fsync, an fsync) becomes the flush
//     leader (flush.busy): it takes everything buffered, writes it as one
//     batch, and publishes what it wrote, including the batch's segment and
//     size as the next fsync's target.
//   - The first waiter that needs an fsync of what is written, and finds
//     neither a write nor an fsync running, fsyncs the target without
//     holding either role against writers (flush.syncing), then publishes
//     it as synced.
//
// A write may thus run while an fsync of the same segment does; rotate waits
// for that fsync before it closes the segment. Waiters sleep on flush.cond
// until their records are done or a role is free.
func (l *Log) waitFor(seq uint64, sync bool) error {
	l.flush.Lock()
	defer l.flush.Unlock()
	for {
		if f := l.failure.Load(); f != nil {
			return f.err
		}
		if l.flush.synced >= seq || (!sync && l.flush.written >= seq) {
			return nil
		}
		if l.flush.closed {
			return ErrClosed
		}
		if l.flush.written < seq {
			// A waiter that needs an fsync anyway lets the one running
			// finish first, so that the records appended meanwhile go out
			// as one batch with one fsync (group commit). One that needs
			// none writes at once: SyncNone's write-behind never waits
			// for an fsync.
			if l.flush.busy || (sync && l.flush.syncing) {
				l.flush.cond.Wait()
				continue
			}
			l.lead()
			continue
		}
		// Written, not yet synced: sync the target, which holds seq.
		if l.flush.busy || l.flush.syncing {
			l.flush.cond.Wait()
			continue
		}
		l.syncTarget()
	}
}

// lead writes a batch as the flush leader, and publishes the result. It is
// called, and returns, with flush locked.
func (l *Log) lead() {
	l.flush.busy = true
	synced := l.w.seg.synced // the syncer changes it under flush's lock only
	l.flush.Unlock()
	err := l.flushBatch(synced)
	l.flush.Lock()
	l.flush.busy = false
	if err != nil {
		l.fail(err)
	} else {
		w := &l.w
		if w.seg.synced == w.seg.size {
			// Earlier segments were synced before the active one was
			// created, so everything written is synced.
			w.synced = w.written
		}
		l.flush.written, l.flush.synced = w.written, max(l.flush.synced, w.synced)
		l.flush.segments[len(l.flush.segments)-1].size = w.seg.size
		l.flush.target = syncTarget{seg: w.seg, size: w.seg.size, seq: w.written}
	}
	l.flush.cond.Broadcast()
}

// syncTarget fsyncs the segment the last batch went to, up to where that
// batch ended, and publishes the records up to it as synced. It is called,
// and returns, with flush locked, when no write or fsync runs.
func (l *Log) syncTarget() {
	t := l.flush.target
	if t.seg != nil && t.seg.synced < t.size { // nil: nothing written since Open, which synced all
		l.flush.syncing = true
		l.flush.Unlock()
		err := t.seg.f.Sync()
		l.flush.Lock()
		l.flush.syncing = false
		if err != nil {
			l.fail(fmt.Errorf("sync %s: %w", t.seg.name, err))
			l.flush.cond.Broadcast()
			return
		}
		l.syncs.Add(1)
		t.seg.synced = max(t.seg.synced, t.size)
	}
	l.flush.synced = max(l.flush.synced, t.seq)
	l.flush.cond.Broadcast()
}

// flushBatch writes everything buffered as one batch closed by a commit
// marker, with one write, starting a new segment first if the batch would
// overflow the current one. It fills in the buffered frames' CRCs first,
// outside l.mu. synced is how far the active segment was known to be synced when
// the leader began: the commit marker records it. Only the flush leader
// calls flushBatch. Any error leaves the files in an unknown state: the
// caller fails the log, and nothing is retried.
func (l *Log) flushBatch(synced int64) error {
	l.mu.Lock()
	batch, count, recordBytes, produced, last := l.buf, l.bufCount, l.recordBytes, l.bufProduced, l.last.Load()
	l.buf, l.bufCount, l.recordBytes, l.bufProduced = l.w.spare[:0], 0, 0, false
	l.woken = false
	l.mu.Unlock()

	w := &l.w
	putFrameCRCs(batch)
	if recordBytes > 0 && l.cfg.snapshotBytes > 0 {
		l.sinceSnapshot.Add(int64(recordBytes))
	}
	if count > 0 {
		if w.seg.size > segmentHeaderSize && w.seg.size+int64(len(batch))+commitFrameSize > l.cfg.segmentSize {
			if err := l.rotate(last - uint64(count) + 1); err != nil {
				return err
			}
			synced = w.seg.synced // the new segment's header
		}
		seg := w.seg
		if produced {
			l.index.noteBatch(seg.id, seg.size, batch)
		}
		batch = appendCommit(batch, last, count, synced)
		n, err := seg.f.WriteAt(batch, seg.size)
		if err == nil && n != len(batch) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", seg.name, err)
		}
		seg.size += int64(len(batch))
		w.written = last
		l.batches.Add(1)
	}
	if cap(batch) <= 4*flushThreshold {
		w.spare = batch[:0]
	} else {
		w.spare = nil // let a burst's buffer go
	}
	return nil
}

// rotate fsyncs the active segment, then creates the next one for records
// from firstSeq on. A sealed segment is therefore always whole and synced:
// recovery treats any damage to it as corruption. Only the flush leader, or
// Open, calls rotate.
func (l *Log) rotate(firstSeq uint64) error {
	old := l.w.seg
	// An fsync of old may be running; it must end before old is synced
	// here and closed. No other starts while the leader writes.
	l.flush.Lock()
	for l.flush.syncing {
		l.flush.cond.Wait()
	}
	l.flush.Unlock()
	if old.synced < old.size {
		if err := old.f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", old.name, err)
		}
		l.syncs.Add(1)
		old.synced = old.size
	}
	l.w.synced = l.w.written
	seg, err := l.createSegment(old.id+1, firstSeq)
	if err != nil {
		return err
	}
	l.w.seg = seg
	l.flush.Lock()
	l.flush.segments[len(l.flush.segments)-1].size = old.size
	l.flush.segments = append(l.flush.segments, segment{id: seg.id, firstSeq: firstSeq, size: seg.size})
	l.flush.Unlock()
	if err := old.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", old.name, err)
	}
	return nil
}

// createSegment creates segment id atomically: it writes the header to a
// temporary file, fsyncs it, renames it into place and fsyncs the directory.
// A segment file under its final name therefore always has a whole header;
// a crash leaves at most a temporary file, which Open removes.
func (l *Log) createSegment(id, firstSeq uint64) (*activeSegment, error) {
	name := segmentName(id)
	path := filepath.Join(l.dir, name)
	f, err := l.fs.Create(path+tempSuffix, l.cfg.filePerm)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name+tempSuffix, err)
	}
	hdr := segmentHeader{id: id, firstSeq: firstSeq, maxRecord: uint32(l.cfg.maxRecordSize)}.encode()
	if err := l.finishFile(f, hdr, path+tempSuffix, path); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &activeSegment{id: id, name: name, f: f, size: segmentHeaderSize, synced: segmentHeaderSize}, nil
}

// finishFile writes b at the start of the new file f, fsyncs it, renames tmp
// to path and fsyncs the directory.
func (l *Log) finishFile(f file, b []byte, tmp, path string) error {
	n, err := f.WriteAt(b, 0)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(tmp), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(tmp), err)
	}
	l.syncs.Add(1)
	if err := l.fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", filepath.Base(tmp), err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", l.dir, err)
	}
	return nil
}

// syncLoop writes everything buffered at every tick, and at every wake-up
// (SyncNone's, when Append finds writeBehindEarly bytes buffered; wake is
// nil under SyncInterval), until Close, and fsyncs it too if fsync: it is
// SyncInterval's fsync and SyncNone's write-behind. A tick that finds nothing
// new does nothing, since waitFor returns at once. A failure is recorded by
// waitFor, and every later tick finds it at once.
func (l *Log) syncLoop(tick <-chan time.Time, wake <-chan struct{}, stop func(), fsync bool) {
	defer close(l.syncDone)
	defer stop()
	kicked := l.batches.Load() // the batches syncBehind was told of
	for {
		select {
		case <-l.stopSync:
			return
		case <-tick:
		case <-wake:
		}
		_ = l.waitFor(l.last.Load(), fsync)
		if l.kickSync == nil { // not SyncNone
			continue
		}
		// What reaches the disk is syncBehind's to start and fsync: calls
		// that may wait for the device, while this goroutine must keep
		// writing.
		if b := l.batches.Load(); b != kicked {
			kicked = b
			select {
			case l.kickSync <- struct{}{}:
			default: // syncBehind has a kick pending already
			}
		}
	}
}

// startWriteBack is SyncNone's: once writeBackBytes more have been written
// to the active segment, it has the kernel start writing them to the device,
// without waiting. The log then goes out steadily, and the background fsync
// finds little left to write: a long fsync holds a thread, and on a small
// machine the CPU the write-behind goroutine needs to keep up. It is a hint,
// so it ignores errors: any it meets, the next fsync reports. Only
// syncBehind calls it, as sync_file_range may wait for room in the device's
// queue.
func (l *Log) startWriteBack() {
	l.flush.Lock()
	t := l.flush.target
	l.flush.Unlock()
	wb := &l.writeBack
	if t.seg == nil {
		return
	}
	if t.seg != wb.seg { // a new segment, written from its start
		wb.seg, wb.upTo = t.seg, 0
	}
	if t.size-wb.upTo < writeBackBytes {
		return
	}
	if f, ok := t.seg.f.(writeBackStarter); ok {
		// A rotation may close f meanwhile; the call then fails, harmlessly.
		_ = f.startWriteBack(wb.upTo, t.size-wb.upTo)
	}
	wb.upTo = t.size
}

// unsynced returns how many bytes written to the active segment are not
// known to be fsynced.
func (l *Log) unsynced() int64 {
	l.flush.Lock()
	defer l.flush.Unlock()
	if t := l.flush.target; t.seg != nil {
		return t.size - t.seg.synced
	}
	return 0
}

// syncBehind is SyncNone's disk work, off the write-behind goroutine's
// path: at each kick from syncLoop, which has written more, it starts the
// write-back of what was written (startWriteBack) and, once syncBehindBytes
// are unsynced, fsyncs everything written so far, while syncLoop goes on
// writing. A failure is recorded by waitFor, like syncLoop's.
func (l *Log) syncBehind() {
	defer close(l.syncBehindDone)
	for {
		select {
		case <-l.stopSync:
			return
		case <-l.kickSync:
		}
		l.startWriteBack()
		if l.unsynced() < syncBehindBytes {
			continue
		}
		l.flush.Lock()
		written := l.flush.written
		l.flush.Unlock()
		_ = l.waitFor(written, true)
	}
}
