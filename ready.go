package worklease

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Lock order of the pull calls: Manager.pullMu, then record.mu, then
// readyQueue.mu. pullMu is held only while the queue is made and filled
// (see Manager.pullQueue) and while Close closes it; q.mu, like a shard's
// expiry.mu, is taken under a record's lock or alone, never before one.

// A readyQueue holds the domains Claim may lease: those that are idle,
// running and have a backlog, the longest waiting first. A Manager makes
// it at its first pull call (see Manager.pullQueue); until then it keeps
// none, and its calls pay one atomic load for it.
//
// Each ready domain has one entry, under a ticket that live maps it to.
// A call that makes its domain ready lists it (see sync), under a new
// ticket; one that makes it stop being ready delists it, which only
// deletes it from live: its entry goes stale where it lies, and is
// dropped when met, or by compact once stale entries outnumber the live
// ones. An entry is in now if the domain was ready at once, oldest first,
// or in later, a min-heap by time, while a retry's delay keeps it waiting;
// Claim takes whichever of the two heads became ready first.
type readyQueue struct {
	mu     sync.Mutex                  // guards live, ticket, now, head and later
	live   map[*domainRecord]readyLive // each ready domain's entry
	ticket uint64                      // the last ticket given; tickets start at 1
	now    []readyEntry                // entries of domains ready at once, from head on, oldest first
	head   int
	later  []readyEntry // a min-heap by (at, ticket): entries whose domain waits for a delay to end, or became ready in the past

	filled atomic.Bool   // every domain ready when the queue was made is listed
	signal chan struct{} // holds one wake-up, for the next waiting claim
	done   chan struct{} // closed when the Manager closes; guarded by Manager.pullMu
	closed bool          // done is closed; guarded by Manager.pullMu
}

// readyLive is what the queue keeps of a ready domain's entry.
type readyLive struct {
	ticket uint64
	at     instant
}

// A readyEntry is a domain's place in the queue.
type readyEntry struct {
	r      *domainRecord
	at     instant // when the domain became ready, or will once its delay ends
	ticket uint64
}

// before orders entries by the time their domain became ready, then by
// when they were listed.
func (e *readyEntry) before(o *readyEntry) bool {
	return e.at < o.at || e.at == o.at && e.ticket < o.ticket
}

func newReadyQueue() *readyQueue {
	return &readyQueue{live: make(map[*domainRecord]readyLive), signal: make(chan struct{}, 1), done: make(chan struct{})}
}

// sync brings r's place in the queue up to date with its state at now: r,
// which is locked, is listed if it became ready, as ready from now or from
// when its state holds it back until (a schedule, a retry's delay; see
// domainState.readyAt), and delisted if it is no longer ready. A domain
// that stays ready keeps its place, unless what holds it back changed: it
// then waits until the later time, or, if that ended early (an operator
// gave the backlog another head, say), it is ready from now.
func (q *readyQueue) sync(r *domainRecord, now instant) {
	ready := !r.dropped && r.state.ready()
	if !ready {
		if r.listed {
			r.listed, r.held = false, false
			q.mu.Lock()
			delete(q.live, r)
			q.mu.Unlock()
		}
		return
	}
	due := r.state.readyAt()
	if r.listed && !r.held && due == 0 {
		return // listed as ready at once, and nothing holds it back
	}
	q.mu.Lock()
	at := max(now, due)
	if r.listed {
		e := q.live[r]
		switch {
		case due > e.at: // held back longer
			at = due
		case e.at > now && due < e.at: // held back no more, or less
		default:
			at = e.at // its place stands
		}
		if at != e.at {
			q.push(r, now, at)
		}
	} else {
		r.listed = true
		q.push(r, now, at)
	}
	r.held = due != 0
	q.mu.Unlock()
}

// putBack lists r, which is locked, again if it is listed, after a claim
// took its entry and found its head not to be granted: the entry it took
// was its last, and a listed domain must have one.
func (q *readyQueue) putBack(r *domainRecord, now instant) {
	if !r.listed {
		return
	}
	q.mu.Lock()
	q.push(r, now, max(now, r.state.readyAt()))
	q.mu.Unlock()
}

// push lists r as ready at at. q.mu must be held. An entry ready from
// now goes at the back of now; one ready later, or from a moment already
// past (a domain held back longer by a schedule that has ended, whose
// place is then ahead of domains ready since), goes into later, whose
// order is by time.
func (q *readyQueue) push(r *domainRecord, now, at instant) {
	q.ticket++
	e := readyEntry{r: r, at: at, ticket: q.ticket}
	q.live[r] = readyLive{e.ticket, at}
	if at != now {
		q.later = append(q.later, e)
		q.up(len(q.later) - 1)
		if at < now || q.later[0].ticket == e.ticket {
			q.wake() // ready already, or a waiting claim may set its timer by this delay
		}
	} else {
		q.now = append(q.now, e)
		q.wake()
	}
	if len(q.now)-q.head+len(q.later) > 2*len(q.live)+64 {
		q.compact()
	}
}

// stale reports whether e is no longer its domain's entry. q.mu must be
// held.
func (q *readyQueue) stale(e *readyEntry) bool { return q.live[e.r].ticket != e.ticket }

// pop removes and returns the entry Claim takes next at now: of the
// domains ready at once and those whose delay has ended, the one that
// became ready first. It drops the stale entries it meets. The entry
// stays its domain's until the claim that took it syncs the domain.
func (q *readyQueue) pop(now instant) (readyEntry, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head < len(q.now) && q.stale(&q.now[q.head]) {
		q.popNow()
	}
	q.dropStaleLater()
	hasNow := q.head < len(q.now)
	hasLater := len(q.later) > 0 && q.later[0].at <= now
	switch {
	case hasLater && (!hasNow || q.later[0].before(&q.now[q.head])):
		return q.popLater(), true
	case hasNow:
		return q.popNow(), true
	}
	return readyEntry{}, false
}

// current reports whether e, which pop returned, is still its domain's
// entry: the domain, whose record the caller has locked, has stayed ready
// since it was listed.
func (q *readyQueue) current(e *readyEntry) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.stale(e)
}

// more reports whether a domain may be ready for a claim: the queue has
// entries (some of which may be stale, or wait for a delay).
func (q *readyQueue) more() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.head < len(q.now) || len(q.later) > 0
}

// nextDelay returns when the earliest delay of a domain that waits for
// one ends, if one does.
func (q *readyQueue) nextDelay() (instant, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropStaleLater()
	if len(q.later) == 0 {
		return 0, false
	}
	return q.later[0].at, true
}

// wake wakes one waiting claim, or the next to wait. q.mu need not be
// held.
func (q *readyQueue) wake() {
	select {
	case q.signal <- struct{}{}:
	default: // one is pending already
	}
}

// close wakes every waiting claim for good. Manager.pullMu must be held.
func (q *readyQueue) close() {
	if !q.closed {
		q.closed = true
		close(q.done)
	}
}

// popNow removes and returns the head of now, which must not be empty.
func (q *readyQueue) popNow() readyEntry {
	e := q.now[q.head]
	q.now[q.head] = readyEntry{}
	q.head++
	if q.head == len(q.now) {
		q.now, q.head = q.now[:0], 0
	} else if q.head >= 64 && 2*q.head >= len(q.now) {
		n := copy(q.now, q.now[q.head:])
		clear(q.now[n:])
		q.now, q.head = q.now[:n], 0
	}
	return e
}

// dropStaleLater pops stale entries off the top of later.
func (q *readyQueue) dropStaleLater() {
	for len(q.later) > 0 && q.stale(&q.later[0]) {
		q.popLater()
	}
}

// popLater removes and returns the top of later, which must not be empty.
func (q *readyQueue) popLater() readyEntry {
	e := q.later[0]
	last := len(q.later) - 1
	q.later[0] = q.later[last]
	q.later[last] = readyEntry{}
	q.later = q.later[:last]
	if last > 0 {
		q.down(0)
	}
	return e
}

func (q *readyQueue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.later[i].before(&q.later[parent]) {
			return
		}
		q.later[i], q.later[parent] = q.later[parent], q.later[i]
		i = parent
	}
}

func (q *readyQueue) down(i int) {
	for {
		child := 2*i + 1
		if child >= len(q.later) {
			return
		}
		if right := child + 1; right < len(q.later) && q.later[right].before(&q.later[child]) {
			child = right
		}
		if !q.later[child].before(&q.later[i]) {
			return
		}
		q.later[i], q.later[child] = q.later[child], q.later[i]
		i = child
	}
}

// compact drops every stale entry. q.mu must be held.
func (q *readyQueue) compact() {
	now := make([]readyEntry, 0, len(q.live))
	for i := q.head; i < len(q.now); i++ {
		if !q.stale(&q.now[i]) {
			now = append(now, q.now[i])
		}
	}
	q.now, q.head = now, 0
	later := q.later[:0]
	for i := range q.later {
		if !q.stale(&q.later[i]) {
			later = append(later, q.later[i])
		}
	}
	clear(q.later[len(later):])
	q.later = later
	for i := len(q.later)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// check verifies the queue: it lists as many domains as there are
// records whose listed flag is set (listed), each with exactly one entry,
// and its delays are a heap. Run it when no call is under way: a claim
// holds the entry it popped.
func (q *readyQueue) check(listed int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var errs []error
	if len(q.live) != listed {
		errs = append(errs, fmt.Errorf("ready queue lists %d domains, their records %d", len(q.live), listed))
	}
	entries := make(map[*domainRecord]int, len(q.live))
	for _, e := range q.now[q.head:] {
		if !q.stale(&e) {
			entries[e.r]++
		}
	}
	for i, e := range q.later {
		if !q.stale(&e) {
			entries[e.r]++
		}
		if i > 0 && e.before(&q.later[(i-1)/2]) {
			errs = append(errs, fmt.Errorf("ready queue's delays are not a heap at %d", i))
		}
	}
	for r := range q.live {
		if entries[r] != 1 {
			errs = append(errs, fmt.Errorf("domain %q has %d entries in the ready queue", r.domain, entries[r]))
		}
	}
	return errors.Join(errs...)
}

// pullQueue returns the Manager's ready queue, making it on the first
// call: it lists every domain ready then, and from then on every call
// keeps the queue up to date as it releases its domain (see finish). The
// domains ready when the queue is made are listed as ready at once (or
// when their schedules and retry delays end), in no particular order:
// until then the Manager does not note when a domain becomes ready.
func (m *Manager) pullQueue() *readyQueue {
	if q := m.ready.Load(); q != nil && q.filled.Load() {
		return q
	}
	now := m.now() // outside pullMu: a caller's clock may take locks of its own
	m.pullMu.Lock()
	defer m.pullMu.Unlock()
	if q := m.ready.Load(); q != nil {
		return q // filled, under pullMu, by the call that made it
	}
	q := newReadyQueue()
	if m.pullClosed {
		q.close()
	}
	// Calls list their domains from here on, and the loop the others: a
	// record's lock orders the two.
	m.ready.Store(q)
	m.forEachRecord(func(_ *shard, _ string, r *domainRecord) {
		r.mu.Lock()
		q.sync(r, now)
		r.mu.Unlock()
	})
	q.filled.Store(true)
	return q
}

// stopPulling wakes every claim that waits, for good: the Manager is
// closed, and their next claim says so.
func (m *Manager) stopPulling() {
	m.pullMu.Lock()
	defer m.pullMu.Unlock()
	m.pullClosed = true
	if q := m.ready.Load(); q != nil {
		q.close()
	}
}
