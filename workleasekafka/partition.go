package workleasekafka

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A partition is the Consumer's record of one assignment of one partition:
// the records fetched from it that are not finished, in offset order, and
// so how far it may be committed. Kafka's commit says "every record below
// this offset is done", and records of different keys finish out of order,
// so a partition is committed at its lowest unfinished record, or one past
// its last fetched record when none is unfinished.
//
// A record's domain is its partition's prefix and its key: an assignment
// that ends (its partition revoked or lost) leaves its records' domains
// behind, and the partition retired, until the Pool has drained what was
// queued for it; a later assignment of the same partition is a new
// partition, with a new prefix, whose records are new domains.
type partition struct {
	topic  string
	id     int32
	prefix string // "topic/partition/assignment/"; immutable

	mu sync.Mutex // guards everything below
	// pending holds the records fetched from the lowest unfinished one on,
	// in offset order (the order Kafka delivers a partition in), some of
	// them done. Its front is never done.
	pending    []entry
	next       int64 // one past the last record fetched; -1 before the first
	first      int64 // the first record fetched; -1 before it
	unfinished int   // the entries of pending neither done nor dropped
	running    int   // handlers running on its records
	// drained is closed once running drops to zero after the partition was
	// revoked; nil while nobody waits for it.
	drained chan struct{}
	// skip holds the finished offsets that the commit the assignment began
	// at said were finished (WithCommitMetadata), from next on.
	skip          []span
	committed     int64               // the last offset committed; -1 before the first
	committedMeta string              // the metadata committed with it
	revoked       bool                // the assignment ended: run nothing more
	paused        bool                // fetching paused for back-pressure
	parked        map[string]parking  // each parked domain's parked record
	touched       map[string]struct{} // domains with a record finished since the last sweep
}

// A parking is the record a domain parked at, and its key.
type parking struct {
	offset int64
	key    string
}

// An entry is one fetched record of a partition.
type entry struct {
	offset int64
	rec    *kgo.Record // nil once done
	domain string
	done   bool // it ran to the end, or was given up on
	// dropped: its partition was revoked before it ran; it is not done,
	// and no commit passes it.
	dropped bool
	// cancel cancels its handler's context while one runs.
	cancel context.CancelCauseFunc
	// base is the attempts made before the last Resume: the attempt a
	// handler is told of is the Pool's less base.
	base int
	// parkedAt is the Pool's attempt that parked the record, while it is
	// parked; 0 otherwise.
	parkedAt int
	// givenUp: the record was given up on and its dead letter is not
	// produced yet (or Skip was called on it while parked): its next
	// attempt produces the dead letter without running the handler.
	givenUp bool
	// cause and attempts are the last failure's error and how many
	// attempts the record had made, once it was given up on or parked.
	cause    error
	attempts int
}

func newPartition(topic string, id int32, assignment uint64) *partition {
	return &partition{
		topic: topic, id: id, prefix: fmt.Sprintf("%s/%d/%d/", topic, id, assignment),
		next: -1, first: -1, committed: -1,
		parked: map[string]parking{}, touched: map[string]struct{}{},
	}
}

// addResult says what add did with a record.
type addResult uint8

const (
	_        addResult = iota
	added              // the record is pending: submit it
	seen               // fetched before: nothing to do
	finished           // the assignment's commit metadata says it is finished
	forsaken           // the partition was revoked
)

// add records that rec, of domain, was fetched, and says whether to
// submit it.
func (p *partition) add(rec *kgo.Record, domain string) addResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.revoked:
		return forsaken
	case rec.Offset < p.next:
		return seen
	}
	if p.first < 0 {
		p.first = rec.Offset
	}
	p.next = rec.Offset + 1
	if p.skipping(rec.Offset) {
		if len(p.pending) > 0 { // kept, so that the commit's metadata still says so
			p.pending = append(p.pending, entry{offset: rec.Offset, done: true})
		}
		return finished
	}
	p.pending = append(p.pending, entry{offset: rec.Offset, rec: rec, domain: domain})
	p.unfinished++
	return added
}

// skipping reports whether offset is in skip, and drops the spans below
// it: records come in offset order. p.mu must be held.
func (p *partition) skipping(offset int64) bool {
	for len(p.skip) > 0 && p.skip[0].to <= offset {
		p.skip = p.skip[1:]
	}
	return len(p.skip) > 0 && p.skip[0].from <= offset
}

// find returns the index in pending of the record at offset, or -1. p.mu
// must be held.
func (p *partition) find(offset int64) int {
	i, ok := slices.BinarySearchFunc(p.pending, offset, func(e entry, o int64) int {
		switch {
		case e.offset < o:
			return -1
		case e.offset > o:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// A start is what begin found of a record about to run.
type start struct {
	rec      *kgo.Record
	base     int
	givenUp  bool // give up on it, without running the handler
	cause    error
	attempts int
}

// begin marks the record at offset running under cancel, and returns it;
// or reports false if it is not to run: it is done or dropped, or not
// pending, or the partition was revoked, which drops it unrun (the
// partition's backlog is dropped; the next owner runs it).
func (p *partition) begin(offset int64, cancel context.CancelCauseFunc) (start, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.find(offset)
	if i < 0 || p.pending[i].done || p.pending[i].dropped {
		return start{}, false
	}
	e := &p.pending[i]
	if p.revoked {
		e.dropped, e.rec = true, nil
		p.unfinished--
		p.touched[e.domain] = struct{}{}
		return start{}, false
	}
	e.cancel = cancel
	p.running++
	return start{rec: e.rec, base: e.base, givenUp: e.givenUp, cause: e.cause, attempts: e.attempts}, true
}

// end marks the record at offset no longer running, and finished if done;
// it reports whether the partition was paused and may be resumed now.
func (p *partition) end(offset int64, done bool, maxUnfinished int) (resume bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	if p.running == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
	i := p.find(offset)
	if i < 0 {
		return false
	}
	p.pending[i].cancel = nil
	if done && !p.pending[i].done && !p.pending[i].dropped {
		p.doneLocked(i)
	}
	return p.paused && !p.revoked && p.unfinished <= maxUnfinished/2
}

// doneLocked marks pending[i] finished and drops the finished records at
// the front. p.mu must be held.
func (p *partition) doneLocked(i int) {
	e := &p.pending[i]
	e.done, e.rec, e.cause, e.givenUp = true, nil, nil, false
	p.touched[e.domain] = struct{}{}
	delete(p.parked, e.domain)
	p.unfinished--
	n := 0
	for n < len(p.pending) && p.pending[n].done {
		n++
	}
	// Dropping the front keeps the array until an append moves it; an
	// append that grows it copies only the pending records.
	clear(p.pending[:n])
	p.pending = p.pending[n:]
}

// giveUp records that the record at offset was given up on, with cause,
// after attempts, and its dead letter not produced yet: its next attempt
// produces it.
func (p *partition) giveUp(offset int64, cause error, attempts int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := p.find(offset); i >= 0 && !p.pending[i].done {
		e := &p.pending[i]
		e.givenUp, e.cause, e.attempts = true, cause, attempts
	}
}

// park records that the record at offset parked its domain, of key, at
// the Pool's attempt attempt, having failed with cause after attempts of
// its own. It reports false if the partition was revoked meanwhile.
func (p *partition) park(offset int64, key string, attempt int, cause error, attempts int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.find(offset)
	if p.revoked || i < 0 || p.pending[i].done {
		return false
	}
	e := &p.pending[i]
	e.parkedAt, e.cause, e.attempts = attempt, cause, attempts
	p.parked[e.domain] = parking{offset, key}
	return true
}

// unpark ends the parking of domain's record: it runs again with its
// attempts counted afresh, or, if skip, it is given up on with the cause
// that parked it. It reports false if domain has no record parked.
func (p *partition) unpark(domain string, skip bool) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pk, ok := p.parked[domain]
	if !ok || p.revoked {
		return 0, false
	}
	offset := pk.offset
	i := p.find(offset)
	if i < 0 || p.pending[i].done {
		return 0, false
	}
	delete(p.parked, domain)
	e := &p.pending[i]
	if skip {
		e.givenUp = true
	} else {
		e.base, e.cause, e.attempts = e.parkedAt, nil, 0
	}
	e.parkedAt = 0
	return offset, true
}

// revoke marks the partition revoked, so that nothing more of it runs, and
// returns a channel closed once no handler runs on its records (nil if none
// does); its parked domains, which must be resumed for the Pool to drain
// them; and whether its fetching was paused, which it no longer is.
func (p *partition) revoke() (drained <-chan struct{}, parked []string, paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.revoked = true
	paused, p.paused = p.paused, false
	for d := range p.parked {
		parked = append(parked, d)
	}
	clear(p.parked)
	if p.running == 0 {
		return nil, parked, paused
	}
	if p.drained == nil {
		p.drained = make(chan struct{})
	}
	return p.drained, parked, paused
}

// cancelRunning cancels the contexts of the handlers that run on its
// records, with cause.
func (p *partition) cancelRunning(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.pending {
		if c := p.pending[i].cancel; c != nil {
			c(cause)
		}
	}
}

// commitPoint returns the offset the partition may be committed at and the
// metadata to commit with it, and reports false if nothing was fetched or
// nothing changed since the last commit. With metadata, the metadata lists
// the finished records above the offset. It checks the offset first, and
// returns an error matching ErrCommitRefused if it would pass an unfinished
// record or go back.
func (p *partition) commitPoint(metadata bool) (int64, string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next < 0 {
		return 0, "", false, nil
	}
	offset := p.next
	if len(p.pending) > 0 {
		offset = p.pending[0].offset
	}
	if err := p.checkLocked(offset); err != nil {
		return 0, "", false, err
	}
	var meta string
	if metadata {
		meta = encodeMetadata(offset, p.finishedAboveLocked())
	}
	// Nothing changed since the last commit; or, with no commit yet,
	// nothing finished.
	if offset == p.committed && meta == p.committedMeta || p.committed < 0 && offset <= p.first && meta == "" {
		return 0, "", false, nil
	}
	return offset, meta, true, nil
}

// checkLocked checks that committing offset passes no unfinished record
// and does not go back: every record fetched below it is finished, which
// the records still pending say, as those not pending were let go only
// once finished; and the count of unfinished records agrees with them.
// p.mu must be held.
func (p *partition) checkLocked(offset int64) error {
	unfinished := 0
	for i := range p.pending {
		e := &p.pending[i]
		if e.done {
			continue
		}
		if !e.dropped {
			unfinished++
		}
		if e.offset < offset {
			return fmt.Errorf("%w: %s/%d: offset %d passes unfinished record %d", ErrCommitRefused, p.topic, p.id, offset, e.offset)
		}
	}
	switch {
	case unfinished != p.unfinished:
		return fmt.Errorf("%w: %s/%d: %d records pending unfinished, %d counted", ErrCommitRefused, p.topic, p.id, unfinished, p.unfinished)
	case offset < p.committed:
		return fmt.Errorf("%w: %s/%d: offset %d goes back from %d", ErrCommitRefused, p.topic, p.id, offset, p.committed)
	case offset > p.next:
		return fmt.Errorf("%w: %s/%d: offset %d passes the last fetched record, %d", ErrCommitRefused, p.topic, p.id, offset, p.next-1)
	}
	return nil
}

// finishedAboveLocked returns the spans of finished records above the
// commit point: runs of finished pending records, then what is left of
// skip. p.mu must be held.
func (p *partition) finishedAboveLocked() []span {
	var spans []span
	for i := 0; i < len(p.pending); {
		if !p.pending[i].done {
			i++
			continue
		}
		j := i
		for j+1 < len(p.pending) && p.pending[j+1].done {
			j++
		}
		spans = append(spans, span{p.pending[i].offset, p.pending[j].offset + 1})
		i = j + 1
	}
	for _, s := range p.skip {
		s.from = max(s.from, p.next)
		if s.from >= s.to {
			continue
		}
		if n := len(spans); n > 0 && spans[n-1].to >= s.from {
			spans[n-1].to = max(spans[n-1].to, s.to)
			continue
		}
		spans = append(spans, s)
	}
	return spans
}

// committedAt records that offset was committed with meta.
func (p *partition) committedAt(offset int64, meta string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.committed, p.committedMeta = max(p.committed, offset), meta
}

// assignedAt records the commit the assignment begins at, with the spans
// its metadata says are finished, if nothing was fetched yet.
func (p *partition) assignedAt(committed int64, skip []span) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= 0 {
		return
	}
	p.committed, p.skip = committed, skip
}

// sweep returns the domains that had a record finished since the last
// sweep, and forgets them.
func (p *partition) sweep() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.touched) == 0 {
		return nil
	}
	ds := make([]string, 0, len(p.touched))
	for d := range p.touched {
		ds = append(ds, d)
	}
	clear(p.touched)
	return ds
}

// touch puts domains back for the next sweep.
func (p *partition) touch(domains []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range domains {
		p.touched[d] = struct{}{}
	}
}

// drainedAll reports whether a revoked partition has nothing left: no
// record unfinished, and no domain to forget.
func (p *partition) drainedAll() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.revoked && p.unfinished == 0 && p.running == 0 && len(p.touched) == 0
}
