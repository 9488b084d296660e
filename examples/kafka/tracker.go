package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A tracker knows, for each partition, which of the records polled from it
// are not finished yet, and so how far the partition may be committed: a
// Kafka commit says "every record below this offset is done", so the
// consumer may commit up to its lowest unfinished record, and past its last
// polled record when none is unfinished. Records finish out of order, as
// many keys share a partition and run in parallel; the records above the
// lowest unfinished one that are finished already are not committed, and a
// consumer that restarts from the commit gets them again. With
// WithMonotonicOffsets the backend then answers AlreadyProcessed for those
// of them it finished (if it kept its state: a journal or the PostgreSQL
// backend), so they are not handled twice. This is how Confluent's Parallel
// Consumer commits, without its encoding of the finished offsets above the
// commit in the commit's metadata.
//
// The consumer adds a record when it polls it, before submitting it, and the
// observer finishes it when the backend reports it terminal (EventProcessed
// or EventDeadLettered), so a record is unfinished from before its work can
// start until after it ended.
type tracker struct {
	mu    sync.Mutex           // guards everything below
	parts map[int32]*partTrack // by partition
	keys  map[string]int32     // each key's partition; a key lives in one
	// unfinished counts the records added and not finished; idle is closed
	// and replaced when it drops to zero.
	unfinished int
	idle       chan struct{}
}

// partTrack is one partition's part of a tracker.
type partTrack struct {
	// pending holds the records polled from the lowest unfinished one on,
	// in offset order (the order Kafka delivers a partition in), some of
	// them finished already. Its front is never finished.
	pending []pendingRecord
	next    int64 // one past the last record polled; -1 before the first
}

type pendingRecord struct {
	offset int64
	done   bool
}

func newTracker() *tracker {
	return &tracker{parts: map[int32]*partTrack{}, keys: map[string]int32{}, idle: make(chan struct{})}
}

// add records that the record at offset in partition, with key, was polled
// and is unfinished, and reports true; or reports false, adding nothing, if
// the partition was polled past offset already. That happens when the group
// rebalanced and the consumer resumed from the last commit, below records
// it had polled: those are tracked already, and have been submitted.
//
// A key must stay in one partition: the key is the domain, and a domain's
// offsets must grow (WithMonotonicOffsets), which they do only within a
// partition. A key found in two partitions means the topic's partition
// count changed under the producer; the domain would then have to be the
// key and the partition together.
func (t *tracker) add(key string, partition int32, offset int64) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.keys[key]; ok && p != partition {
		return false, fmt.Errorf("key %q is in partitions %d and %d", key, p, partition)
	}
	pt := t.parts[partition]
	if pt == nil {
		pt = &partTrack{next: -1}
		t.parts[partition] = pt
	}
	if offset < pt.next {
		return false, nil
	}
	t.keys[key] = partition
	pt.pending = append(pt.pending, pendingRecord{offset: offset})
	pt.next = offset + 1
	t.unfinished++
	return true, nil
}

// finish records that the record of key at offset is terminal. It reports
// false if the record is not unfinished: never added, or finished already.
func (t *tracker) finish(key string, offset int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.keys[key]
	if !ok {
		return false
	}
	pt := t.parts[p]
	i, found := slices.BinarySearchFunc(pt.pending, offset, func(r pendingRecord, o int64) int {
		switch {
		case r.offset < o:
			return -1
		case r.offset > o:
			return 1
		}
		return 0
	})
	if !found || pt.pending[i].done {
		return false
	}
	pt.pending[i].done = true
	n := 0
	for n < len(pt.pending) && pt.pending[n].done {
		n++
	}
	// Dropping the front keeps the slice's array until append moves it; an
	// append that grows it copies only the pending records.
	pt.pending = pt.pending[n:]
	if t.unfinished--; t.unfinished == 0 {
		close(t.idle)
		t.idle = make(chan struct{})
	}
	return true
}

// commitOffsets returns, for each partition polled from, the offset it may
// be committed at: its lowest unfinished record, or one past its last
// polled record when none is unfinished.
func (t *tracker) commitOffsets() map[int32]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	offs := make(map[int32]int64, len(t.parts))
	for p, pt := range t.parts {
		if len(pt.pending) > 0 {
			offs[p] = pt.pending[0].offset
		} else {
			offs[p] = pt.next
		}
	}
	return offs
}

// polledTo returns, for each partition polled from, one past its last
// polled record.
func (t *tracker) polledTo() map[int32]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	offs := make(map[int32]int64, len(t.parts))
	for p, pt := range t.parts {
		offs[p] = pt.next
	}
	return offs
}

// pending returns the number of unfinished records, and a channel that is
// closed when that number next drops to zero (if it is not zero now).
func (t *tracker) pending() (int, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unfinished, t.idle
}

// describe says where each partition with unfinished records is held up.
func (t *tracker) describe() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for _, p := range keysOf(t.parts) {
		if pt := t.parts[p]; len(pt.pending) > 0 {
			fmt.Fprintf(&b, "partition %d at offset %d; ", p, pt.pending[0].offset)
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}
