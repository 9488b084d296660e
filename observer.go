package worklease

import (
	"sync"
)

// queueEvents queues the changes st kept of r, which is locked, as events
// for the observer, to be delivered once the lock is released (see
// deliver).
func (m *Manager) queueEvents(r *domainRecord, st *step) {
	if st.n == 0 {
		return
	}
	at := st.now.in(m.loc)
	q := r.extra.events
	q.mu.Lock()
	for i := range st.n {
		c := st.change(i)
		q.pending = append(q.pending, Event{
			Kind: c.kind, Domain: r.domain, Offset: c.offset, Attempt: c.attempt, Token: c.token, Cause: c.cause, At: at,
		})
	}
	q.mu.Unlock()
}

// eventQueue holds a domain's events until they are delivered.
type eventQueue struct {
	mu         sync.Mutex // guards everything below; taken after the record's mu, never before
	pending    []Event    // emitted, not yet handed to a deliverer
	spare      []Event    // a delivered batch's buffer, kept for reuse
	delivering bool       // a goroutine is calling the observer with this queue's events
}

// deliver hands r's queued events to the observer in order. r.mu must not
// be held. At most one goroutine delivers a domain's events at a time, which
// keeps them in order; a goroutine that finds another delivering leaves its
// events to it. That includes an observer that calls back into the same
// domain: its events are delivered after it returns, never deadlocking.
// The queue is the domain's, not the record's: a record that replaces one
// Forget dropped takes its queue over (see Manager.replace), so that its
// events follow the dropped record's.
func (m *Manager) deliver(r *domainRecord) {
	if m.observer == nil {
		return
	}
	q := r.extra.events
	q.mu.Lock()
	for !q.delivering && len(q.pending) > 0 {
		batch := q.pending
		q.pending, q.spare = q.spare[:0], nil
		q.delivering = true
		q.mu.Unlock()
		m.observeAll(q, batch)
		q.mu.Lock()
		q.delivering = false
		clear(batch) // drop references to causes
		if q.spare == nil {
			q.spare = batch[:0]
		}
	}
	q.mu.Unlock()
	r.mu.Lock()
	dropped := r.dropped
	r.mu.Unlock()
	if dropped { // Forget left r in the map until its last events went out
		m.unlinkDrained(r)
	}
}

// drained reports whether q has no event left to deliver and none being
// delivered. A nil queue (no observer) is drained.
func (q *eventQueue) drained() bool {
	if q == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.delivering && len(q.pending) == 0
}

// observeAll calls the observer with each event. If it panics, the queue is
// marked as no longer delivering so that later events still go out.
func (m *Manager) observeAll(q *eventQueue, batch []Event) {
	sent := 0
	defer func() {
		if p := recover(); p != nil {
			// The events after the one that panicked go out with the next
			// delivery, ahead of any emitted since.
			q.mu.Lock()
			q.pending = append(append([]Event(nil), batch[sent+1:]...), q.pending...)
			q.delivering = false
			q.mu.Unlock()
			panic(p)
		}
	}()
	for _, ev := range batch {
		m.observer.Observe(ev)
		sent++
	}
}
