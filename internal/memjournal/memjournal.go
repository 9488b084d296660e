// Package memjournal is an in-memory worklease.Journal for tests: records are
// durable as soon as they are appended, snapshots replace the records they
// cover, and failures can be injected.
package memjournal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/worklease/worklease"
)

// ErrInjected is the error an injected failure returns.
var ErrInjected = errors.New("memjournal: injected failure")

// Journal is an in-memory worklease.Journal. The zero Journal is empty and
// ready to use. It is safe for concurrent use.
type Journal struct {
	mu      sync.Mutex
	snap    []byte // the latest snapshot; nil if none
	snapSeq uint64 // the last record the snapshot covers
	seqs    []uint64
	records []worklease.Record // after the snapshot, with seqs
	// kept holds the payloads of the records the snapshot covers and
	// refers to (see SnapshotStateKeeping), by sequence number.
	kept     map[uint64][]byte
	last     uint64 // the last sequence number appended
	closed   bool
	replayed bool   // ReplayRecords ran since the last Reopen: a Manager owns it
	failAt   uint64 // Append of this sequence number fails; 0: never
	waitFail bool   // every Wait fails
	// SnapshotEvery makes SnapshotDue report true once this many records
	// were appended since the last snapshot; 0: never.
	SnapshotEvery int
	snapshots     int
}

var _ worklease.PayloadJournal = (*Journal)(nil)

// FailAppendAt makes the Append that would get sequence number seq fail.
func (j *Journal) FailAppendAt(seq uint64) {
	j.mu.Lock()
	j.failAt = seq
	j.mu.Unlock()
}

// FailWaits makes every later Wait fail.
func (j *Journal) FailWaits() {
	j.mu.Lock()
	j.waitFail = true
	j.mu.Unlock()
}

// AppendRecord implements worklease.Journal.
func (j *Journal) AppendRecord(rec worklease.Record) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return 0, errors.New("memjournal: closed")
	}
	if j.failAt != 0 && j.last+1 == j.failAt {
		return 0, ErrInjected
	}
	// Round-trip through the binary form, as a real journal would.
	data, _ := rec.MarshalBinary()
	var back worklease.Record
	if err := back.UnmarshalBinary(data); err != nil {
		return 0, err
	}
	j.last++
	j.seqs = append(j.seqs, j.last)
	j.records = append(j.records, back)
	return j.last, nil
}

// Wait implements worklease.Journal.
func (j *Journal) Wait(seq uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.waitFail && seq > 0 {
		return ErrInjected
	}
	if seq > j.last {
		return errors.New("memjournal: wait for a record never appended")
	}
	return nil
}

// ReplayRecords implements worklease.Journal. Like a wal.Log, it serves one
// Manager: a second call before Reopen returns worklease.ErrJournalInUse.
func (j *Journal) ReplayRecords(restore func([]byte) error, apply func(uint64, worklease.Record) error) error {
	j.mu.Lock()
	if j.replayed {
		j.mu.Unlock()
		return worklease.ErrJournalInUse
	}
	j.replayed = true
	snap := j.snap
	seqs, records := append([]uint64(nil), j.seqs...), append([]worklease.Record(nil), j.records...)
	j.mu.Unlock()
	if snap != nil {
		if err := restore(snap); err != nil {
			return err
		}
	}
	for i, rec := range records {
		if err := apply(seqs[i], rec); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotState implements worklease.Journal.
func (j *Journal) SnapshotState(write func(io.Writer) error) error {
	return j.SnapshotStateKeeping(func(w io.Writer, _ func(uint64)) error { return write(w) })
}

// SnapshotStateKeeping implements worklease.PayloadJournal: the payloads
// of the records the snapshot covers are dropped, but for those write
// names with keep, which ReadPayload goes on reading.
func (j *Journal) SnapshotStateKeeping(write func(io.Writer, func(seq uint64)) error) error {
	j.mu.Lock()
	upTo := j.last
	j.mu.Unlock()
	var buf bytes.Buffer
	keep := map[uint64]bool{}
	if err := write(&buf, func(seq uint64) { keep[seq] = true }); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	kept := map[uint64][]byte{}
	for seq := range keep {
		if p, ok := j.kept[seq]; ok {
			kept[seq] = p
		} else if i, found := slices.BinarySearch(j.seqs, seq); found && seq <= upTo && j.records[i].Payload != nil {
			kept[seq] = j.records[i].Payload
		}
	}
	j.kept = kept
	j.snap, j.snapSeq = buf.Bytes(), upTo
	i := 0
	for i < len(j.seqs) && j.seqs[i] <= upTo {
		i++
	}
	j.seqs, j.records = j.seqs[i:], j.records[i:]
	j.snapshots++
	return nil
}

// ReadPayload implements worklease.PayloadJournal.
func (j *Journal) ReadPayload(seq uint64) ([]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if p, ok := j.kept[seq]; ok {
		return bytes.Clone(p), nil
	}
	if i, found := slices.BinarySearch(j.seqs, seq); found && j.records[i].Payload != nil {
		return bytes.Clone(j.records[i].Payload), nil
	}
	return nil, fmt.Errorf("memjournal: record %d holds no payload the journal has", seq)
}

// SnapshotDue implements worklease.Journal.
func (j *Journal) SnapshotDue() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.SnapshotEvery > 0 && len(j.records) >= j.SnapshotEvery
}

// Close implements worklease.Journal. A closed Journal can be reopened with
// Reopen, as a process restart reopens its directory.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	return nil
}

// Reopen makes a closed (or crashed) Journal usable again, keeping what it
// holds and clearing injected failures.
func (j *Journal) Reopen() *Journal {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed, j.failAt, j.waitFail, j.replayed = false, 0, false, false
	return j
}

// Records returns the records after the snapshot and their sequence numbers.
func (j *Journal) Records() ([]uint64, []worklease.Record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]uint64(nil), j.seqs...), append([]worklease.Record(nil), j.records...)
}

// Snapshots returns how many snapshots were written.
func (j *Journal) Snapshots() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.snapshots
}
