package worklease

import "cmp"

// A call on one domain takes one path, from its checks to its answer:
//
//	sh, r, now, err := m.enter(op, domain, offset, access{…}, nil) // checks, clock, lock
//	if r == nil {
//		return …, err // refused, or nothing to do
//	}
//	st := m.newStep(now)                        // where the state machine notes its changes
//	…, err := r.state.call(&m.policy, &st, …)  // the transition
//	if err := m.finish(sh, r, &st, op, err); err != nil { // journal, unlock, wait, deliver
//		return …, err
//	}
//
// A call that passes through several domains (a batch) ends each step with
// finishIn instead, and waits once for all of them (endBatch).

// An access says how a call enters its domain (see enter).
type access struct {
	// timed: the call records when it happens (a grant, a dead letter), so
	// it reads the clock whatever the options; otherwise it reads it only
	// if needed (see nowIfNeeded).
	timed bool
	// create: the call makes a record for a domain the Manager does not
	// know. Otherwise it answers unknown for such a domain, wrapped (see
	// domainError), or nothing if unknown is nil: it has nothing to do.
	create  bool
	unknown error
	// invalid, if not nil, is the call's error for an argument other than
	// its domain and offset, which are checked first.
	invalid error
	// pull: the call makes domains ready, so the Manager keeps its queue
	// of ready domains from now on (see pullQueue).
	pull bool
}

// enter is the start of a call op on one domain: it checks the Manager,
// the domain and the offset (0 for a call that takes none), in that order
// (see accepts), then a.invalid; it then does what a asks for, replaces
// *cause, a failure's cause, if cause is not nil, with the cause the
// domain's state keeps (see keepCause), reads the clock, and locks the
// domain's record. (cause is not part of a: an access's errors escape to
// the heap, with the access, and a failure's cause would go with them.) It returns the record, locked,
// with its shard and the time read, or a nil record and the call's answer:
// its error, or nil for a domain the Manager does not know and the call
// has nothing to do on. Everything before the lock (the clock, a cause's
// Error method) may run the caller's code, which never runs under a
// domain's lock: a caller's clock may take locks of its own.
func (m *Manager) enter(op, domain string, offset int64, a access, cause *error) (*shard, *domainRecord, instant, error) {
	if !m.accepts(domain, offset) {
		return nil, nil, 0, m.refuse(op, domain, offset)
	}
	if a.invalid != nil {
		return nil, nil, 0, domainError(op, domain, a.invalid)
	}
	if a.pull {
		m.pullQueue()
	}
	if cause != nil {
		*cause = keepCause(*cause, m.journal != nil)
	}
	var now instant
	if a.timed {
		now = m.now()
	} else {
		now = m.nowIfNeeded()
	}
	sh, r := m.lockRecord(domain, a.create)
	if r == nil {
		if a.unknown != nil {
			return nil, nil, 0, m.absent(domainError(op, domain, a.unknown))
		}
		return nil, nil, 0, m.absent(nil)
	}
	return sh, r, now, nil
}

// invalidIf returns err if bad is set, for access.invalid.
func invalidIf(bad bool, err error) error {
	if bad {
		return err
	}
	return nil
}

// newStep returns the step of a call made at now. A Manager that reports
// its changes, to a journal or an observer, keeps them in the step's
// buffer, which stays on the calling function's stack: newStep is small
// enough to be inlined, and inlined, the buffer it makes does not escape
// (go build -gcflags=-m says so; TestReportingCallsDoNotAllocate checks
// it) unless the caller hands the step to a function value, as adminCall
// does off the hot path. Keep newStep that small.
func (m *Manager) newStep(now instant) step {
	st := step{now: now}
	if m.reporting {
		st.kept = new([stepInline]change)
	}
	return st
}

// endStep ends st, a call's step on r, a record of sh that the caller
// locked: it counts the step's changes, journals them and queues their
// events (see journalChanges, queueEvents), brings the shard's expiry
// index up to date with r's lease and the ready queue, if the Manager
// keeps one, with r's readiness, and unlocks r. It returns the sequence
// number of r's latest record, which the call's answer depends on, and the
// journal's error, if appending failed, for the call to wait on (see
// waitDurable).
func (m *Manager) endStep(sh *shard, r *domainRecord, st *step) (seq uint64, appendErr error) {
	sh.countAll(r, st)
	if m.reporting {
		if m.observer != nil {
			m.queueEvents(r, st)
		}
		if m.journal != nil {
			appendErr = m.journalChanges(r, st)
		}
	}
	if m.expiring {
		sh.expiry.sync(r)
	}
	if q := m.ready.Load(); q != nil {
		q.sync(r, st.now, st.now)
	}
	if m.journal != nil { // lastSeq sits in the record's third line: read it only if needed
		seq = r.lastSeq
	}
	r.mu.Unlock()
	return seq, appendErr
}

// finish ends a call op on r that made the changes in st (see endStep),
// waits until the journal holds every record of the domain so far (the
// call's own, and those its answer depends on), and delivers r's events.
// It returns the call's error: the journal's failure, which closed the
// Manager and which the call returns instead of its answer, or else err,
// the state machine's, wrapped (see domainError), or nil.
func (m *Manager) finish(sh *shard, r *domainRecord, st *step, op string, err error) error {
	if ferr := m.waitDurable(m.endStep(sh, r, st)); ferr != nil {
		return ferr
	}
	if m.observer != nil {
		m.deliver(r)
	}
	if err != nil {
		return domainError(op, r.domain, err)
	}
	return nil
}

// A batch is one call's passage through several domains, each in a step
// of its own that ends as finish ends a call, but for the waits: the
// journal is waited for once, for every record the batch wrote or depends
// on, and the events are delivered after it (see endBatch).
type batch struct {
	seq     uint64          // the latest record of the domains touched
	err     error           // the journal's first append error; the batch stops at it
	touched []*domainRecord // whose events to deliver, with an observer
}

// finishIn ends a step of the call op on r, a record of sh locked by the
// caller, in b (see endStep), and returns err, the state machine's, wrapped
// (see domainError), or nil; endBatch does the rest.
func (m *Manager) finishIn(b *batch, sh *shard, r *domainRecord, st *step, op string, err error) error {
	seq, appendErr := m.endStep(sh, r, st)
	b.seq, b.err = max(b.seq, seq), cmp.Or(b.err, appendErr)
	if m.observer != nil {
		b.touched = append(b.touched, r)
	}
	if err != nil {
		return domainError(op, r.domain, err)
	}
	return nil
}

// endBatch ends b: it waits until the journal holds every record b depends
// on, and delivers the events of the domains it touched. An error means
// the journal failed, and the Manager is closed.
func (m *Manager) endBatch(b *batch) error {
	if err := m.waitDurable(b.seq, b.err); err != nil {
		return err
	}
	for _, r := range b.touched {
		m.deliver(r)
	}
	return nil
}

// readAll is the path of a call that reads every domain (Leases, Domains,
// DeadLetters of all): it calls read with each domain the Manager knows
// and its record, locked, one domain at a time, so that under load what it
// reads is not a snapshot of one instant; then it waits until the journal
// holds every record what it read depends on, those of the Forget calls
// that dropped domains included.
func (m *Manager) readAll(read func(domain string, r *domainRecord)) error {
	var seq uint64
	m.forEachRecord(func(_ *shard, domain string, r *domainRecord) {
		r.mu.Lock()
		if !r.dropped {
			read(domain, r)
		}
		seq = max(seq, r.lastSeq) // a dropped record's: its Forget
		r.mu.Unlock()
	})
	return m.waitDurable(seq, nil)
}
