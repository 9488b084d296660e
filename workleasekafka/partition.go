package workleasekafka

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease"
)

// A partition is the Consumer's record of one assignment of one partition:
// the records fetched from it that are not finished, in offset order, and
// so how far it may be committed. Kafka's commit says "every record below
// this offset is done", and records of different keys finish out of order,
// so a partition is committed at its lowest unfinished record, or one past
// its last fetched record when none is unfinished.
//
// A record's domain is its partition's prefix and its key. The records of
// a domain are handed to the Pool in batches: a record whose domain has a
// batch queued and not started joins that batch, up to maxBatch records,
// and any other starts a batch of its own, submitted as one offset, its
// first record's, so that a Pool that falls behind takes many records of a
// key per job while one that keeps up takes them one by one. A batch runs
// its records in order, each with attempts of its own; a failed one ends
// the job, and the Pool's retry of the job goes on from it.
//
// An assignment that ends (its partition revoked or lost) leaves its
// records' domains behind, and the partition retired, until the Pool has
// drained what was queued for it; a later assignment of the same partition
// is a new partition, with a new prefix, whose records are new domains.
type partition struct {
	topic  string
	id     int32
	prefix string // "topic/partition/assignment/"; immutable
	// resumeBelow is when a partition paused for back-pressure may be
	// fetched again: once no more of its records are unfinished.
	resumeBelow int     // immutable
	budget      *budget // the Consumer's count of unfinished records; immutable
	// gone is revoked, read without the lock by batches between records.
	gone atomic.Bool
	// held is paused, read without the lock by the queue of records
	// polled ahead (see aheadQueue), which sets them aside while it is
	// set.
	held atomic.Bool

	mu sync.Mutex // guards everything below
	// pending holds the records fetched from the lowest unfinished one on,
	// in offset order (the order Kafka delivers a partition in), some of
	// them done. Its front is never done. recs holds their records, each
	// at its entry's index, nil once done or dropped: kept apart, the
	// entries hold no pointers, which the collector then need not scan,
	// and a window of many thousand entries costs it little.
	pending    []entry
	recs       []*kgo.Record
	base       []entry       // the array pending is a window of (see push)
	rbase      []*kgo.Record // the array recs is the same window of
	next       int64         // one past the last record fetched; -1 before the first
	first      int64         // the first record fetched; -1 before it
	unfinished int           // the entries of pending neither done nor dropped
	// keys holds the keys of the records fetched, by their domain's name
	// in the partition (the domain past the prefix): each key's domain,
	// made once, and its batch queued and not started. A key is let go of
	// once the Manager forgot its domain (see forget).
	keys map[string]*keyState
	// running counts the batches a handler runs.
	running int
	// ctx is the context of the handlers of the partition's records, made
	// by the first batch to start, and cancelled by cancelRunning; nil
	// before.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// resumeAt holds, for each batch that stopped before its end, by its
	// first offset, the record it goes on from: the records before it are
	// done, and may be let go of already.
	resumeAt map[int64]int64
	// failures holds what is known of the records that failed their last
	// attempt and were given up on or parked, by offset.
	failures map[int64]failure
	// drained is closed once no batch runs after the partition was
	// revoked; nil while nobody waits for it.
	drained chan struct{}
	// skip holds the finished offsets that the commit the assignment began
	// at said were finished (WithCommitMetadata), from next on.
	skip          []span
	committed     int64               // the last offset committed; -1 before the first
	committedMeta string              // the metadata committed with it
	revoked       bool                // the assignment ended: run nothing more
	superseded    bool                // assigned again: take no more records
	paused        bool                // fetching paused for back-pressure
	parked        map[string]parking  // each parked domain's parked record
	touched       map[string]struct{} // domains with a batch ended since the last sweep
}

// A budget counts the records handed to a Consumer's handlers and
// unfinished across its partitions, those of partitions paused for
// back-pressure aside, and holds the handing over of more back at the
// limit (WithMaxUnfinished) until half of them are done: they wait in the
// queue of records polled ahead (see aheadQueue) meanwhile.
type budget struct {
	limit, low int64 // immutable
	n          atomic.Int64
	waiting    atomic.Bool   // the poll loop waits for n to come down to low
	wake       chan struct{} // holds one wake-up for it
}

func newBudget(limit int) *budget {
	return &budget{limit: int64(limit), low: int64(limit / 2), wake: make(chan struct{}, 1)}
}

func (b *budget) add(k int) {
	if k != 0 {
		b.n.Add(int64(k))
	}
}

// room returns how many records a poll may take: as many as are left
// below the limit, and at least least.
func (b *budget) room(least int) int {
	return max(least, int(b.limit-b.n.Load()))
}

// done counts k records finished (or dropped), and wakes the poll loop if
// it waits and they are down to low.
func (b *budget) done(k int) {
	if k == 0 {
		return
	}
	// Read after the decrement, as wait sets waiting before it reads n
	// (both sequentially consistent): one of the two sees the other.
	if b.n.Add(-int64(k)) <= b.low && b.waiting.Load() {
		select {
		case b.wake <- struct{}{}:
		default: // one is pending already
		}
	}
}

// wait returns true at once below the limit; at it, it waits until the
// records are down to low (true), or until ctx ends or stuck has passed
// (false).
func (b *budget) wait(ctx context.Context, stuck time.Duration) bool {
	if b.n.Load() < b.limit {
		return true
	}
	b.waiting.Store(true)
	defer b.waiting.Store(false)
	t := time.NewTimer(stuck)
	defer t.Stop()
	for b.n.Load() > b.low {
		select {
		case <-b.wake:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// maxBatch bounds the records of one batch: a job of a key with a deep
// backlog still ends now and then, for revocations and commits to see.
const maxBatch = 128

// A keyState is a key's in an assignment of a partition: its domain, and
// its batch queued and not started, to which its next record is added.
type keyState struct {
	domain string // the partition's prefix and the key's name; immutable
	// The open batch: its first and last records' offsets, and its size,
	// 0 if the key has none.
	lead, tail int64
	size       int
}

// nameOf appends to b the name in p of the domain of key: the key itself,
// or '#' and the hex of its SHA-256 if the prefix and the key would be
// too long for a domain.
func nameOf[K string | []byte](b []byte, p *partition, key K) []byte {
	if len(p.prefix)+len(key) > worklease.MaxDomainLen {
		sum := sha256.Sum256([]byte(key))
		return hex.AppendEncode(append(b, '#'), sum[:])
	}
	return append(b, key...)
}

// A parking is the record a domain parked at, and its key.
type parking struct {
	offset int64
	key    string
}

// A failure is what is known of a record given up on or parked.
type failure struct {
	// givenUp: the record was given up on and its dead letter is not
	// produced yet (or Skip was called on it while parked): its next
	// attempt produces the dead letter without running the handler.
	givenUp bool
	cause   error // the last attempt's error
	failed  int   // the attempts made
}

// An entry is one fetched record of a partition.
type entry struct {
	offset int64
	next   int64 // the offset of the next record of its batch; -1 if none
	// attempts is the attempts made at it since it was fetched, or since
	// Resume.
	attempts int32
	done     bool // it ran to the end, or was given up on
	// dropped: its partition was revoked before it ran; it is not done,
	// and no commit passes it.
	dropped bool
}

func newPartition(topic string, id int32, assignment uint64, b *budget) *partition {
	return &partition{
		topic: topic, id: id, prefix: fmt.Sprintf("%s/%d/%d/", topic, id, assignment),
		resumeBelow: int(b.limit / 4), budget: b,
		next: -1, first: -1, committed: -1,
		keys:     map[string]*keyState{},
		resumeAt: map[int64]int64{}, failures: map[int64]failure{},
		parked: map[string]parking{}, touched: map[string]struct{}{},
	}
}

// A batchLead is a batch that addAll began: submit it.
type batchLead struct {
	domain string
	offset int64
}

// addAll records that recs were fetched, in offset order, and appends to
// leads the batches they begin; it returns leads and how many records it
// skipped as finished by the assignment's commit metadata. names holds
// the name (see nameOf) of each record's domain; if nil, a record's key
// names it. Records fetched before, and those of a revoked partition or
// of an assignment superseded by another, are ignored.
func (p *partition) addAll(recs []*kgo.Record, names []string, leads []batchLead) ([]batchLead, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	skipped, added := 0, 0
	defer func() {
		if !p.paused {
			p.budget.add(added)
		}
	}()
	for i, r := range recs {
		if p.revoked || p.superseded || r.Offset < p.next {
			continue
		}
		if p.first < 0 {
			p.first = r.Offset
		}
		p.next = r.Offset + 1
		if p.skipping(r.Offset) {
			if len(p.pending) > 0 { // kept, so that the commit's metadata still says so
				p.push(entry{offset: r.Offset, next: -1, done: true}, nil)
			}
			skipped++
			continue
		}
		p.unfinished++
		added++
		var ks *keyState
		switch {
		case names != nil:
			ks = p.keyLocked(names[i])
		case len(p.prefix)+len(r.Key) <= worklease.MaxDomainLen:
			if ks = p.keys[string(r.Key)]; ks == nil {
				ks = p.keyLocked(string(r.Key))
			}
		default:
			ks = p.keyLocked(string(nameOf(nil, p, r.Key)))
		}
		if ks.size > 0 && ks.size < maxBatch {
			if i := p.find(ks.tail); i >= 0 {
				p.pending[i].next = r.Offset
				ks.tail = r.Offset
				ks.size++
				p.push(entry{offset: r.Offset, next: -1}, r)
				continue
			}
		}
		ks.lead, ks.tail, ks.size = r.Offset, r.Offset, 1
		p.push(entry{offset: r.Offset, next: -1}, r)
		leads = append(leads, batchLead{ks.domain, r.Offset})
	}
	return leads, skipped
}

// keyLocked returns the key state of the domain named name, made if
// need be. p.mu must be held.
func (p *partition) keyLocked(name string) *keyState {
	if ks := p.keys[name]; ks != nil {
		return ks
	}
	ks := &keyState{domain: p.prefix + name}
	p.keys[ks.domain[len(p.prefix):]] = ks
	return ks
}

// push appends e, of record r, to pending. pending is a window of an
// array that the finished records leave at its front: at the array's end,
// the window moves back to its start, unless it fills half the array,
// which then doubles. So the array is copied about once for every half of
// it appended, and never left for the collector while it serves. recs is
// the same window of an array of the same size. p.mu must be held.
func (p *partition) push(e entry, r *kgo.Record) {
	if n := len(p.pending); n == cap(p.pending) {
		if size := cap(p.base); size > 0 && n <= size/2 {
			copy(p.base, p.pending)
			copy(p.rbase, p.recs)
			// The old window's records past the new one: those before
			// it are nil already, as finished.
			clear(p.rbase[max(n, size-n):])
			p.pending, p.recs = p.base[:n], p.rbase[:n]
		} else {
			size = max(64, 2*size)
			buf, rbuf := make([]entry, size), make([]*kgo.Record, size)
			copy(buf, p.pending)
			copy(rbuf, p.recs)
			p.base, p.rbase = buf, rbuf
			p.pending, p.recs = buf[:n], rbuf[:n]
		}
	}
	p.pending = append(p.pending, e)
	p.recs = append(p.recs, r)
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
// must be held. A partition's offsets are usually consecutive, so the
// record is looked for where that puts it first.
func (p *partition) find(offset int64) int {
	if len(p.pending) == 0 {
		return -1
	}
	if i := offset - p.pending[0].offset; i >= 0 && i < int64(len(p.pending)) && p.pending[i].offset == offset {
		return int(i)
	}
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

// A task is a record of a running batch.
type task struct {
	offset  int64
	rec     *kgo.Record
	attempt int // the record's, counting this one
	// givenUp, if not nil, says that the record was given up on: produce
	// its dead letter, without running the handler.
	givenUp *failure
}

// start begins running the batch that begins at lead, of domain, and
// appends to tasks the records it has left to run, in order; the batch is
// then no longer open to new records. It returns them with the context to
// run them with: the partition's, which cancelRunning cancels, made from
// base by the first batch. If the partition was revoked, it drops the
// batch's records unrun (the partition's backlog is dropped; its next
// owner runs them) and appends none.
func (p *partition) start(base context.Context, domain string, lead int64, tasks []task) (context.Context, []task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ks := p.keys[domain[len(p.prefix):]]; ks != nil && ks.size > 0 && ks.lead == lead {
		ks.size = 0
	}
	at, ok := p.resumeAt[lead]
	if !ok {
		at = lead
	}
	if p.revoked {
		delete(p.resumeAt, lead)
		p.dropLocked(domain, at)
		return nil, tasks
	}
	for at >= 0 {
		i := p.find(at)
		if i < 0 {
			break
		}
		e := &p.pending[i]
		if !e.done && !e.dropped {
			t := task{offset: e.offset, rec: p.recs[i], attempt: int(e.attempts) + 1}
			if len(p.failures) > 0 {
				if f, ok := p.failures[e.offset]; ok && f.givenUp {
					t.givenUp = &f
				}
			}
			tasks = append(tasks, t)
		}
		at = e.next
	}
	if len(tasks) == 0 {
		delete(p.resumeAt, lead)
		p.touched[domain] = struct{}{}
		return nil, tasks
	}
	if p.ctx == nil {
		p.ctx, p.cancel = context.WithCancelCause(base)
	}
	p.running++
	return p.ctx, tasks
}

// finish ends the running of the batch that begins at lead: its first ran
// tasks are finished; with stopped, the batch stopped at tasks[ran], which
// it made an attempt at if attempted, and goes on from there when the Pool
// tries it again, unless the partition was revoked: then the records left
// are dropped, and finish reports so. It also reports whether the
// partition's fetching may be resumed now.
func (p *partition) finish(domain string, lead int64, tasks []task, ran int, stopped, attempted bool) (dropped, resume bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	done := 0
	for _, t := range tasks[:ran] {
		if i := p.find(t.offset); i >= 0 {
			if e := &p.pending[i]; !e.done && !e.dropped {
				p.doneLocked(i)
				done++
			}
		}
	}
	if !p.paused {
		p.budget.done(done)
	}
	switch {
	case stopped && p.revoked:
		delete(p.resumeAt, lead)
		p.dropLocked(domain, tasks[ran].offset)
		dropped = true
	case stopped:
		t := tasks[ran]
		if attempted {
			if i := p.find(t.offset); i >= 0 {
				p.pending[i].attempts = int32(t.attempt)
			}
		}
		p.resumeAt[lead] = t.offset
	default:
		delete(p.resumeAt, lead)
	}
	p.running--
	p.touched[domain] = struct{}{}
	if p.running == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
	return dropped, p.paused && !p.revoked && p.unfinished <= p.resumeBelow
}

// dropLocked drops the records of a batch of domain from offset on, unrun.
// p.mu must be held.
func (p *partition) dropLocked(domain string, offset int64) {
	dropped := 0
	for offset >= 0 {
		i := p.find(offset)
		if i < 0 {
			break
		}
		e := &p.pending[i]
		if !e.done && !e.dropped {
			e.dropped, p.recs[i] = true, nil
			p.unfinished--
			dropped++
		}
		offset = e.next
	}
	if !p.paused {
		p.budget.done(dropped)
	}
	p.touched[domain] = struct{}{}
}

// doneLocked marks pending[i] finished and lets go of the finished records
// at the front; the caller counts it done in the budget. p.mu must be held.
func (p *partition) doneLocked(i int) {
	e := &p.pending[i]
	e.done, p.recs[i] = true, nil
	if len(p.failures) > 0 {
		delete(p.failures, e.offset)
	}
	p.unfinished--
	if i > 0 {
		return
	}
	n := 1
	for n < len(p.pending) && p.pending[n].done {
		n++
	}
	// Dropping the front keeps the array until an append moves it; an
	// append that grows it copies only the pending records. The records
	// dropped are nil already.
	p.pending, p.recs = p.pending[n:], p.recs[n:]
}

// giveUp records that the record at offset was given up on, with cause,
// after failed attempts, and its dead letter not produced yet: its next
// attempt produces it.
func (p *partition) giveUp(offset int64, cause error, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := p.find(offset); i >= 0 && !p.pending[i].done {
		p.failures[offset] = failure{givenUp: true, cause: cause, failed: failed}
	}
}

// park records that the record at offset, of domain and key, parked its
// domain, having failed with cause after failed attempts. It reports false
// if the partition was revoked meanwhile.
func (p *partition) park(domain string, offset int64, key string, cause error, failed int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.find(offset)
	if p.revoked || i < 0 || p.pending[i].done {
		return false
	}
	p.failures[offset] = failure{cause: cause, failed: failed}
	p.parked[domain] = parking{offset, key}
	return true
}

// unpark ends the parking of domain's record: it runs again with its
// attempts counted afresh, or, if skip, it is given up on with the cause
// that parked it. It reports false if domain has no record parked.
func (p *partition) unpark(domain string, skip bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pk, ok := p.parked[domain]
	if !ok || p.revoked {
		return false
	}
	i := p.find(pk.offset)
	if i < 0 || p.pending[i].done {
		return false
	}
	delete(p.parked, domain)
	if skip {
		f := p.failures[pk.offset]
		f.givenUp = true
		p.failures[pk.offset] = f
	} else {
		delete(p.failures, pk.offset)
		p.pending[i].attempts = 0
	}
	return true
}

// revoke marks the partition revoked, so that nothing more of it runs, and
// returns a channel closed once no batch of it runs (nil if none does); its
// parked domains, which must be resumed for the Pool to drain them; and
// whether its fetching was paused, which it no longer is.
func (p *partition) revoke() (drained <-chan struct{}, parked []string, paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.revoked = true
	p.gone.Store(true)
	paused, p.paused = p.paused, false
	p.held.Store(false)
	if paused { // its records count again, until they are dropped
		p.budget.add(p.unfinished)
	}
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

// supersede marks the assignment ended by a later one of the partition:
// it takes no more records.
func (p *partition) supersede() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.superseded = true
}

// cancelRunning cancels the context of the handlers that run its batches,
// with cause. The partition must have been revoked: no batch starts after.
func (p *partition) cancelRunning(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		p.cancel(cause)
	}
}

// isRevoked reports whether the partition was revoked or lost.
func (p *partition) isRevoked() bool { return p.gone.Load() }

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

// sweep returns the domains that had a batch end since the last sweep,
// and forgets them.
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

// forget lets go of the keys of domains, which the Manager forgot, unless
// a batch of theirs was queued since: a record of theirs fetched later
// makes them anew.
func (p *partition) forget(domains []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range domains {
		name := d[len(p.prefix):]
		if ks := p.keys[name]; ks != nil && ks.size == 0 {
			delete(p.keys, name)
		}
	}
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
// record unfinished, no batch running, and no domain to forget.
func (p *partition) drainedAll() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.revoked && p.unfinished == 0 && p.running == 0 && len(p.touched) == 0
}
