package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
)

// WriteSnapshot replaces the log's snapshot with one covering every record up
// to seq, whose data write produces, then removes the segments that hold only
// records up to seq. The caller's data must be the whole state that replaying
// records 1 to seq produces; Replay hands it back, followed by the records
// after seq.
//
// WriteSnapshot first makes every record up to seq durable, whatever the
// SyncMode. It then streams write's output to a temporary file with a header
// and a CRC-32C, fsyncs it, renames it over the snapshot and fsyncs the
// directory, so a crash leaves either the old snapshot or the new one. It
// calls write without holding any lock; write must not keep w after it
// returns.
//
// An error from write, or from creating, writing or syncing the temporary
// file, is returned and leaves the log as it was. A failure to rename the file,
// remove a segment or sync the directory fails the log (see ErrFailed).
// WriteSnapshot returns an error wrapping ErrInvalidSeq when seq was never
// appended or is older than the current snapshot, ErrSnapshotInProgress while
// another WriteSnapshot runs, ErrClosed after Close, and ErrReadOnly, without
// calling write, if the log was opened WithReadOnly. Segments are kept, until
// the next WriteSnapshot or Open, while a Replay runs.
func (l *Log) WriteSnapshot(seq uint64, write func(w io.Writer) error) error {
	return l.writeSnapshot(seq, write, nil)
}

// writeSnapshot is WriteSnapshot; kept, if not nil, holds the segments the
// snapshot keeps for records it refers to (see SnapshotStateKeeping),
// which write fills in. Those among the segments the snapshot covers are
// named in the kept file, written before the snapshot is renamed into
// place, and stay; the others are removed.
func (l *Log) writeSnapshot(seq uint64, write func(w io.Writer) error, kept map[uint64]bool) error {
	if l.cfg.readOnly {
		return ErrReadOnly
	}
	if f := l.failure.Load(); f != nil {
		return f.err
	}
	l.mu.Lock()
	last, closed := l.last.Load(), l.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if seq == 0 || seq > last {
		return fmt.Errorf("%w: snapshot of records up to %d; the last appended is %d", ErrInvalidSeq, seq, last)
	}
	l.flush.Lock()
	switch {
	case l.flush.closing:
		l.flush.Unlock()
		return ErrClosed
	case l.flush.snapshotting:
		l.flush.Unlock()
		return ErrSnapshotInProgress
	case seq < l.flush.snapSeq:
		cur := l.flush.snapSeq
		l.flush.Unlock()
		return fmt.Errorf("%w: snapshot of records up to %d is older than the current one, up to %d", ErrInvalidSeq, seq, cur)
	}
	l.flush.snapshotting = true
	l.flush.Unlock()
	defer func() {
		l.flush.Lock()
		l.flush.snapshotting = false
		l.flush.cond.Broadcast()
		l.flush.Unlock()
	}()

	// Make the covered records durable in the log first. Open copes with a
	// snapshot ahead of the log, but this way every mode promises records
	// up to seq once WriteSnapshot returns, and the log stays whole up to
	// its snapshot unless damaged.
	if err := l.waitFor(seq, true); err != nil {
		return err
	}
	path := filepath.Join(l.dir, snapshotName)
	if err := l.writeSnapshotFile(path+tempSuffix, seq, write); err != nil {
		return err
	}
	// The segments to keep: named in the kept file before the snapshot is
	// in place, so that Open never removes one the snapshot refers to.
	// Those the snapshot covers are kept here; so are those it may cover
	// once the next segment begins, the one being written included, in
	// case a crash comes first: Open takes every segment before the last
	// one that begins at or before the snapshot's next record as covered.
	// A kept file left by an earlier snapshot is removed once this one is
	// in place, and read only with a snapshot no newer than itself.
	var keep []uint64
	if kept != nil {
		l.flush.Lock()
		for _, s := range l.flush.kept {
			if kept[s.id] {
				keep = append(keep, s.id)
			}
		}
		for _, s := range l.flush.segments {
			if s.firstSeq <= seq && kept[s.id] {
				keep = append(keep, s.id)
			}
		}
		l.flush.Unlock()
	}
	keptPath := filepath.Join(l.dir, keptName)
	if len(keep) > 0 {
		if err := l.writeKeptFile(keptPath, seq, keep); err != nil {
			_ = l.fs.Remove(path + tempSuffix) // Open removes it otherwise
			return err
		}
	}
	// From here on, an error leaves the directory in a state the log does
	// not know: fail closed.
	if err := l.fs.Rename(path+tempSuffix, path); err != nil {
		return l.failAndWake(fmt.Errorf("rename %s: %w", snapshotName+tempSuffix, err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failAndWake(fmt.Errorf("sync directory %s: %w", l.dir, err))
	}

	// Segments are removed oldest first, and a segment is taken off the
	// list before its file is removed, so a Replay that starts now does
	// not look for it.
	var remove []segment
	l.flush.Lock()
	l.flush.snapSeq = seq
	hadKept := len(l.flush.kept) > 0
	if l.flush.replaying == 0 {
		segs := l.flush.segments
		n := 0
		for n < len(segs)-1 && segs[n+1].firstSeq-1 <= seq {
			n++
		}
		var stay []segment
		for _, s := range append(slices.Clone(l.flush.kept), segs[:n]...) {
			if slices.Contains(keep, s.id) {
				stay = append(stay, s)
			} else {
				remove = append(remove, s)
			}
		}
		l.flush.kept = stay
		l.flush.segments = slices.Clone(segs[n:])
	}
	l.flush.Unlock()
	ids := make([]uint64, len(remove))
	for i, s := range remove {
		ids[i] = s.id
	}
	l.index.drop(ids)
	for _, s := range remove {
		if err := l.fs.Remove(filepath.Join(l.dir, segmentName(s.id))); err != nil {
			return l.failAndWake(fmt.Errorf("remove %s: %w", segmentName(s.id), err))
		}
	}
	if len(keep) == 0 && (hadKept || kept != nil) {
		// A kept file of an earlier snapshot, if any, names nothing this
		// one needs.
		if err := l.fs.Remove(keptPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return l.failAndWake(fmt.Errorf("remove %s: %w", keptName, err))
		}
	}
	if len(remove) > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.failAndWake(fmt.Errorf("sync directory %s: %w", l.dir, err))
		}
	}
	return nil
}

// writeKeptFile writes the kept file at path, naming ids for the snapshot
// of records up to seq, through a temporary file that it fsyncs and
// renames into place, then fsyncs the directory.
func (l *Log) writeKeptFile(path string, seq uint64, ids []uint64) error {
	tmp := path + tempSuffix
	f, err := l.fs.Create(tmp, l.cfg.filePerm)
	if err != nil {
		return fmt.Errorf("wal: create %s: %w", keptName+tempSuffix, err)
	}
	if err := l.finishFile(f, encodeKept(seq, ids), tmp, path); err != nil {
		_ = f.Close()
		_ = l.fs.Remove(tmp)
		return fmt.Errorf("wal: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("wal: close %s: %w", keptName, err)
	}
	return nil
}

// writeSnapshotFile writes a whole snapshot file at tmp and fsyncs it. On
// error it removes tmp, if it can; Open removes it otherwise.
func (l *Log) writeSnapshotFile(tmp string, seq uint64, write func(w io.Writer) error) (err error) {
	f, err := l.fs.Create(tmp, l.cfg.filePerm)
	if err != nil {
		return fmt.Errorf("wal: create %s: %w", filepath.Base(tmp), err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("wal: close %s: %w", filepath.Base(tmp), cerr)
		}
		if err != nil {
			_ = l.fs.Remove(tmp)
		}
	}()
	sw := &snapshotWriter{f: f, buf: make([]byte, 0, 64<<10)}
	sw.raw(snapshotHeader(seq))
	if err := write(sw); err != nil {
		return fmt.Errorf("wal: write snapshot: %w", err)
	}
	if err := sw.finish(); err != nil {
		return fmt.Errorf("wal: write %s: %w", filepath.Base(tmp), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: sync %s: %w", filepath.Base(tmp), err)
	}
	l.syncs.Add(1)
	return nil
}

// errSnapshotDone is returned by a snapshotWriter used after its
// WriteSnapshot's write function returned.
var errSnapshotDone = errors.New("wal: snapshot writer used after its write function returned")

// A snapshotWriter buffers a snapshot's bytes into its file, keeping the
// CRC-32C of everything written and the length of the data.
type snapshotWriter struct {
	f    file
	off  int64  // file offset of buf[0]
	buf  []byte // bytes not yet written to f
	crc  uint32 // CRC-32C of every byte so far
	data uint64 // data bytes so far, header excluded
	err  error  // the first write error, or errSnapshotDone; sticky
}

// Write adds p to the snapshot's data.
func (w *snapshotWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.data += uint64(len(p))
	w.raw(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// raw adds p to the file and the CRC.
func (w *snapshotWriter) raw(p []byte) {
	w.crc = crc32.Update(w.crc, castagnoli, p)
	for len(p) > 0 && w.err == nil {
		n := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+n]
		p = p[n:]
		if len(w.buf) == cap(w.buf) {
			w.flush()
		}
	}
}

func (w *snapshotWriter) flush() {
	if w.err != nil || len(w.buf) == 0 {
		return
	}
	n, err := w.f.WriteAt(w.buf, w.off)
	if err == nil && n != len(w.buf) {
		err = io.ErrShortWrite
	}
	w.off += int64(len(w.buf))
	w.buf = w.buf[:0]
	w.err = err
}

// finish writes the trailer (the data length, then the CRC of all before it)
// and flushes. The writer refuses further writes.
func (w *snapshotWriter) finish() error {
	if w.err != nil {
		return w.err
	}
	var t [snapshotTrailerSize]byte
	binary.LittleEndian.PutUint64(t[:], w.data)
	w.raw(t[:8])
	binary.LittleEndian.PutUint32(t[8:], w.crc)
	w.raw(t[8:])
	w.flush()
	err := w.err
	if w.err == nil {
		w.err = errSnapshotDone
	}
	return err
}
