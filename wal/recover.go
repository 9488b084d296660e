package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
)

// recover reads the directory into l, repairing what a crash may leave
// behind. It runs in Open, before any other goroutine can see l.
//
// The rules, from the way the log writes:
//   - Segments and snapshots are created under a temporary name, synced, then
//     renamed: a temporary file is an interrupted creation and is removed,
//     and a final name always has a whole header.
//   - A segment is synced before the next one is created, and batches never
//     span segments: any damage in a segment other than the last is
//     corruption.
//   - In the last segment, the first bad record starts either a torn tail (a
//     write the crash interrupted) or damage to committed data. Every commit
//     marker records how far the segment was synced when its batch was
//     written; a valid marker after the bad record that says the bad record
//     had been synced proves corruption. Otherwise the tail is cut back to
//     the end of the last committed batch.
//   - Every record after the snapshot must be in a segment, in order.
//
// A read-only Log judges the directory by the same rules but changes
// nothing: the repairs are only reported in l.recovery, and no segment stays
// open.
func (l *Log) recover() error {
	ro := l.cfg.readOnly
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("wal: read %s: %w", l.dir, err)
	}
	var ids []uint64
	var temps []string
	hasSnap := false
	for _, name := range names {
		switch {
		case name == snapshotName:
			hasSnap = true
		case isTempName(name):
			temps = append(temps, name)
		default:
			if id, ok := parseSegmentName(name); ok {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	if !ro {
		if err := l.removeFiles(temps); err != nil {
			return err
		}
	}
	removed := temps

	var snapSeq uint64
	if hasSnap {
		seq, _, err := l.readSnapshot()
		if err != nil {
			return err
		}
		snapSeq = seq
	}
	l.flush.snapSeq = snapSeq
	keep, err := l.readKept(names, snapSeq)
	if err != nil {
		return err
	}

	if len(ids) == 0 {
		if hasSnap {
			return corrupt(snapshotName, 0, ErrMissingSegment, "no segment follows the snapshot of records up to %d", snapSeq)
		}
		if ro {
			return fmt.Errorf("wal: no log in %s: %w", l.dir, fs.ErrNotExist)
		}
		seg, err := l.createSegment(1, 1)
		if err != nil {
			return fmt.Errorf("wal: create a log in %s: %w", l.dir, err)
		}
		l.w.seg = seg
		l.flush.segments = []segment{{id: seg.id, firstSeq: 1, size: seg.size}}
		l.last.Store(0)
		l.recovery = Recovery{Created: true, Segments: 1, Removed: removed}
		return nil
	}

	hdrs := make([]segmentHeader, len(ids))
	bad := make([]error, len(ids)) // format errors, reported only for segments that are kept
	for i, id := range ids {
		if hdrs[i], bad[i], err = l.readSegmentHeader(id); err != nil {
			return err
		}
	}
	// Segments before the last one starting at or before snapSeq+1 hold
	// only records the snapshot covers: an interrupted WriteSnapshot left
	// them. Finish its job.
	start := 0
	for i := len(ids) - 1; hasSnap && i > 0; i-- {
		if bad[i] == nil && hdrs[i].firstSeq <= snapSeq+1 {
			start = i
			break
		}
	}
	for _, id := range keep {
		if !slices.Contains(ids, id) {
			return corrupt(segmentName(id), 0, ErrMissingSegment, "segment %s, which the snapshot keeps for its records, is missing", segmentName(id))
		}
	}
	if start > 0 {
		var covered []string
		for i, id := range ids[:start] {
			if !slices.Contains(keep, id) {
				covered = append(covered, segmentName(id))
				continue
			}
			if bad[i] != nil {
				return bad[i]
			}
			// Kept for the records the snapshot refers to: whole, as
			// every segment but the last, and read by ReadPayload alone.
			res, _, err := l.scanSegment(segmentName(id), hdrs[i], false)
			if err != nil {
				return err
			}
			l.flush.kept = append(l.flush.kept, segment{id: id, firstSeq: hdrs[i].firstSeq, size: res.end})
		}
		if !ro {
			if err := l.removeFiles(covered); err != nil {
				return err
			}
		}
		removed = append(removed, covered...)
		ids, hdrs, bad = ids[start:], hdrs[start:], bad[start:]
	}

	var (
		segs     []segment
		torn     *TornTail
		prevLast uint64 // the last record of the previous segment
	)
	for i, id := range ids {
		name := segmentName(id)
		h := hdrs[i]
		switch {
		case bad[i] != nil:
			return bad[i]
		case i > 0 && id != ids[i-1]+1:
			return corrupt(name, 0, ErrMissingSegment, "segment %s is missing", segmentName(ids[i-1]+1))
		case i == 0 && h.firstSeq > snapSeq+1:
			return corrupt(name, 0, ErrMissingSegment, "records %d to %d are in neither the snapshot nor a segment", snapSeq+1, h.firstSeq-1)
		case i > 0 && h.firstSeq <= prevLast:
			return corrupt(name, 0, ErrBadHeader, "first sequence number %d, but the previous segment ends at %d", h.firstSeq, prevLast)
		case i > 0 && h.firstSeq > prevLast+1 && h.firstSeq-1 > snapSeq:
			return corrupt(name, 0, ErrMissingSegment, "records %d to %d are in neither the snapshot nor a segment", prevLast+1, h.firstSeq-1)
		}
		last := i == len(ids)-1
		res, tail, err := l.scanSegment(name, h, last)
		if err != nil {
			return err
		}
		if tail != nil {
			torn = tail
		}
		segs = append(segs, segment{id: id, firstSeq: h.firstSeq, size: res.end})
		prevLast = res.lastSeq
	}

	// The last segment is open in l.w.seg, scanned up to its last committed
	// batch. Cut the tail, and fsync it and the directory: what a crashed
	// process wrote, renamed or removed may still be only in the operating
	// system's cache, and from now on it is acknowledged and built upon.
	if !ro {
		seg := l.w.seg
		if torn != nil {
			if err := seg.f.Truncate(seg.size); err != nil {
				return fmt.Errorf("wal: truncate %s: %w", seg.name, err)
			}
		}
		if err := seg.f.Sync(); err != nil {
			return fmt.Errorf("wal: sync %s: %w", seg.name, err)
		}
		l.syncs.Add(1)
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("wal: sync directory %s: %w", l.dir, err)
		}
	}

	lastSeq := max(prevLast, snapSeq)
	l.last.Store(lastSeq)
	l.w.written, l.w.synced = lastSeq, lastSeq
	l.flush.written, l.flush.synced = lastSeq, lastSeq
	l.flush.segments = segs
	// The next record must follow the last segment's last record, and the
	// active segment must carry the configured record limit.
	if !ro && (snapSeq > prevLast || hdrs[len(hdrs)-1].maxRecord != uint32(l.cfg.maxRecordSize)) {
		if err := l.rotate(lastSeq + 1); err != nil {
			return fmt.Errorf("wal: %w", err)
		}
	}
	l.recovery = Recovery{
		SnapshotSeq: snapSeq,
		LastSeq:     lastSeq,
		Segments:    len(l.flush.segments),
		Torn:        torn,
		Removed:     removed,
		ReadOnly:    ro,
	}
	return nil
}

// readSegmentHeader reads and checks the header of segment id. A header that
// cannot be used is reported in bad; err is an I/O error.
func (l *Log) readSegmentHeader(id uint64) (h segmentHeader, bad, err error) {
	name := segmentName(id)
	f, err := l.fs.Open(filepath.Join(l.dir, name))
	if err != nil {
		return h, nil, fmt.Errorf("wal: open %s: %w", name, err)
	}
	defer f.Close()
	b := make([]byte, segmentHeaderSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return h, nil, fmt.Errorf("wal: read %s: %w", name, err)
	}
	h, err = decodeSegmentHeader(b[:n])
	switch {
	case errors.Is(err, ErrUnsupportedVersion):
		return h, fmt.Errorf("%w (in %s)", err, name), nil
	case err != nil:
		return h, &CorruptionError{File: name, Offset: 0, Reason: err}, nil
	case h.id != id:
		return h, corrupt(name, 0, ErrBadHeader, "the header names segment %d", h.id), nil
	}
	return h, nil, nil
}

// scanResult is what scanFrames found in a segment.
type scanResult struct {
	end     int64  // end of the last whole committed batch
	lastSeq uint64 // the last committed record; the header's firstSeq-1 when none
	bad     int64  // offset of the first bad frame or uncommitted batch; -1 when none
	reason  error  // why the frame at bad is bad
}

// scanSegment checks segment name, whose header is h. The last segment of a
// writable Log stays open in l.w.seg, where the caller finds it; its torn
// tail, if any, is returned. Any other damage is returned as a
// *CorruptionError.
func (l *Log) scanSegment(name string, h segmentHeader, last bool) (scanResult, *TornTail, error) {
	path := filepath.Join(l.dir, name)
	keep := last && !l.cfg.readOnly // the active segment, opened for writing
	var f file
	var err error
	if keep {
		f, err = l.fs.OpenWrite(path)
	} else {
		f, err = l.fs.Open(path)
	}
	if err != nil {
		return scanResult{}, nil, fmt.Errorf("wal: open %s: %w", name, err)
	}
	if keep {
		l.w.seg = &activeSegment{id: h.id, name: name, f: f}
	} else {
		defer f.Close()
	}
	size, err := f.Size()
	if err != nil {
		return scanResult{}, nil, fmt.Errorf("wal: stat %s: %w", name, err)
	}
	var recs []recordPos
	res, err := scanFrames(f, size, h, func(fr frame, off int64) {
		if isProduced(fr.kind, fr.payload) {
			recs = append(recs, recordPos{fr.seq, off})
		}
	})
	if err != nil {
		return res, nil, fmt.Errorf("wal: read %s: %w", name, err)
	}
	// Only the committed records: a torn tail's are cut.
	for len(recs) > 0 && recs[len(recs)-1].off >= res.end {
		recs = recs[:len(recs)-1]
	}
	l.index.add(h.id, recs)
	if keep {
		l.w.seg.size, l.w.seg.synced = res.end, res.end
	}
	if res.bad < 0 {
		return res, nil, nil
	}
	if !last {
		return res, nil, &CorruptionError{File: name, Offset: res.bad, Reason: res.reason}
	}
	proven, err := syncedPast(f, res.bad+1, size, res.bad, res.lastSeq)
	if err != nil {
		return res, nil, fmt.Errorf("wal: read %s: %w", name, err)
	}
	if proven {
		return res, nil, &CorruptionError{File: name, Offset: res.bad, Reason: res.reason}
	}
	return res, &TornTail{File: name, Offset: res.end, Bytes: size - res.end, Reason: res.reason}, nil
}

// scanFrames decodes the frames of a segment of the given size whose header
// is h, checking sequence numbers and commit markers, and stops at the end or
// at the first bad frame. Its error is an I/O error; bad bytes are reported
// in the result.
func scanFrames(r io.ReaderAt, size int64, h segmentHeader, note func(f frame, off int64)) (scanResult, error) {
	res := scanResult{end: segmentHeaderSize, lastSeq: h.firstSeq - 1, bad: -1}
	var fr frameReader
	fr.reset(r, segmentHeaderSize, size, h.maxRecord)
	expect := h.firstSeq // the next record's sequence number
	var pending uint32   // records since the last commit marker
	for {
		off := fr.off
		f, err := fr.next()
		switch {
		case err == io.EOF:
			if pending > 0 {
				res.bad = res.end
				res.reason = reasonf(ErrUncommitted, "%d records from offset %d have no commit marker", pending, res.end)
			}
			return res, nil
		case err != nil && isRecordError(err):
			res.bad, res.reason = off, err
			return res, nil
		case err != nil:
			return res, err
		}
		if f.kind != kindCommit {
			if f.seq != expect {
				res.bad, res.reason = off, reasonf(ErrInvalidRecord, "sequence number %d, want %d", f.seq, expect)
				return res, nil
			}
			expect++
			pending++
			if note != nil {
				note(f, off)
			}
			continue
		}
		count, synced := decodeCommit(f.payload)
		if pending == 0 || count != pending || f.seq != expect-1 || synced < segmentHeaderSize || synced > res.end {
			res.bad, res.reason = off, reasonf(ErrInvalidRecord,
				"commit marker for %d records up to %d, synced to %d; want %d records up to %d, synced to at most %d",
				count, f.seq, synced, pending, expect-1, res.end)
			return res, nil
		}
		pending = 0
		res.end, res.lastSeq = fr.off, f.seq
	}
}

// readSnapshot reads and checks the snapshot file.
func (l *Log) readSnapshot() (uint64, []byte, error) {
	f, err := l.fs.Open(filepath.Join(l.dir, snapshotName))
	if err != nil {
		return 0, nil, fmt.Errorf("wal: open %s: %w", snapshotName, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, nil, fmt.Errorf("wal: stat %s: %w", snapshotName, err)
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, fmt.Errorf("wal: read %s: %w", snapshotName, err)
	}
	return decodeSnapshot(snapshotName, b[:n])
}

// readKept returns the segments the kept file names, if the directory's
// names hold one written for a snapshot no older than the one of snapSeq;
// none for an older one, which a snapshot replaced before its kept file
// was removed. A kept file newer than the snapshot was written for one
// that a crash kept from taking the snapshot's place: the segments it
// names are kept, as they may be the next snapshot's too, and every
// segment the snapshot on disk refers to is among them or not yet
// covered by it.
func (l *Log) readKept(names []string, snapSeq uint64) ([]uint64, error) {
	if snapSeq == 0 || !slices.Contains(names, keptName) {
		return nil, nil
	}
	f, err := l.fs.Open(filepath.Join(l.dir, keptName))
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", keptName, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("wal: stat %s: %w", keptName, err)
	}
	if size > keptHeader+4+8<<20 {
		return nil, corrupt(keptName, 0, ErrBadHeader, "kept file of %d bytes", size)
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("wal: read %s: %w", keptName, err)
	}
	seq, ids, err := decodeKept(b[:n])
	if err != nil || seq < snapSeq {
		return nil, err
	}
	return ids, nil
}

// removeFiles removes the named files from the directory, then fsyncs it.
func (l *Log) removeFiles(names []string) error {
	if len(names) == 0 {
		return nil
	}
	for _, name := range names {
		if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
			return fmt.Errorf("wal: remove %s: %w", name, err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("wal: sync directory %s: %w", l.dir, err)
	}
	return nil
}
