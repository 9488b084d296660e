package worklease

import "cmp"

// A call on one domain takes one path, from its checks to its answer:
//
//	c := &callSucceed
//	sh, r, now, err := m.enter(c, domain, offset) // checks, clock, lock
//	if r == nil {
//		return …, err // refused, or nothing to do
//	}
//	st := step{now: now, kept: m.stepBuffer()}   // where the state machine notes its changes
//	res, err := r.state.call(&m.policy, &st, …) // the transition
//	if ferr := m.finish(sh, r, &st, nil); ferr != nil { // count, journal, unlock, wait, deliver
//		return …, ferr
//	}
//	return res, c.wrap(domain, err)
//
// A call that passes through several domains (a batch) gives finish its
// batch, and waits once for all of them (endBatch). The hot calls (a
// TryAcquire+Succeed cycle) cost what they did before the path was
// gathered here, within about 1 % of instructions: keep enter's and
// finish's arguments few, so that they stay in registers.

// A callSpec says what a call on one domain is: its name, which its
// errors carry, how it enters its domain, and its answers for a domain the
// Manager does not know (an error wrapping unknown, or none if unknown is
// nil: the call has nothing to do) and for bad arguments (see enterWith).
// Each call has its own, below: one pointer says it all.
type callSpec struct {
	op      string
	access  access
	unknown error
	invalid error // the error of the call's other arguments (see enterWith)
}

// The calls' specs.
var (
	callTryAcquire   = callSpec{"TryAcquire", enterTimed | enterCreate, nil, nil}
	callSucceed      = callSpec{"Succeed", 0, ErrNoLease, nil}
	callSucceedNext  = callSpec{"SucceedNext", enterTimed, ErrNoLease, nil} // a grant records when
	callFail         = callSpec{"Fail", enterTimed, ErrNoLease, nil}        // a give-up records when
	callFailNext     = callSpec{"FailNext", enterTimed, ErrNoLease, nil}
	callExtend       = callSpec{"Extend", 0, ErrNoLease, ErrInvalidDuration}
	callExtendMany   = callSpec{"ExtendMany", 0, ErrNoLease, ErrInvalidDuration}
	callSucceedMany  = callSpec{"SucceedMany", 0, ErrNoLease, nil}
	callClaimNext    = callSpec{"ClaimNext", enterTimed, ErrNoLease, nil}
	callRetry        = callSpec{"Retry", enterTimed | enterPull, ErrNoLease, ErrInvalidDuration}
	callRetryMany    = callSpec{"RetryMany", enterTimed | enterPull, ErrNoLease, ErrInvalidDuration}
	callEnqueue      = callSpec{"Enqueue", enterTimed | enterCreate | enterPull, nil, nil}
	callEnqueueAt    = callSpec{"EnqueueAt", enterTimed | enterCreate | enterPull, nil, nil}
	callAppend       = callSpec{"Append", enterTimed | enterCreate | enterPull, nil, nil}
	callCancel       = callSpec{"Cancel", enterTimed, ErrNotQueued, nil}
	callPayload      = callSpec{"Payload", 0, nil, nil} // refuses only: it reads one domain without a step
	callInspect      = callSpec{"Inspect", 0, nil, nil}
	callForget       = callSpec{"Forget", 0, nil, nil}
	callKill         = callSpec{"Kill", enterTimed | enterCreate, nil, nil}
	callKillAhead    = callSpec{"Kill", enterTimed, ErrOffsetAhead, nil} // with WithMonotonicOffsets
	callRedrive      = callSpec{"Redrive", enterTimed, ErrNotDeadLettered, nil}
	callForceRelease = callSpec{"ForceRelease", enterTimed, ErrNoLease, nil}
	callPause        = callSpec{"Pause", enterTimed | enterCreate, nil, nil}
	callResume       = callSpec{"Resume", enterTimed, nil, nil}
	callDeadLetters  = callSpec{"DeadLetters", 0, nil, nil} // refuses only: it reads one domain without a step
	// The Manager's own lookups (see lockRecord).
	lookUp       = callSpec{access: enterUnchecked}
	lookUpCreate = callSpec{access: enterUnchecked | enterCreate}
)

// An access says how a call enters its domain (see enter): a set of these.
type access uint8

const (
	// enterTimed: the call records when it happens (a grant, a dead
	// letter), so it reads the clock whatever the options; otherwise it
	// reads it only if needed (see nowIfNeeded).
	enterTimed access = 1 << iota
	// enterCreate: the call makes a record for a domain the Manager does
	// not know.
	enterCreate
	// enterPull: the call makes domains ready, so the Manager keeps its
	// queue of ready domains from now on (see enterWith).
	enterPull
	// enterUnchecked: no call but the Manager itself looks the domain up
	// (see lockRecord): nothing is checked, the clock is not read, and an
	// unknown domain gets a nil record and no error.
	enterUnchecked
)

// enter is the start of the call c on one domain: it checks the Manager,
// the domain and the offset (0 for a call that takes none), in that order
// (see accepts), reads the clock as c.access says, and locks the domain's
// record. It returns the record, locked, with its shard and the time read,
// or a nil record and the call's answer for a refused call or an unknown
// domain (see callSpec). The clock is read before the lock: it may be the
// caller's, which may take locks of its own, and a caller's code never
// runs under a domain's lock. The lookup is written here rather than
// called, so that a call passes through one function before its
// transition; a call that needs more before the lock enters with
// enterWith.
func (m *Manager) enter(c *callSpec, domain string, offset int64) (*shard, *domainRecord, instant, error) {
	var now instant
	if c.access&enterUnchecked == 0 {
		if !m.accepts(domain, offset) {
			return nil, nil, 0, m.refuse(c, domain, offset)
		}
		if c.access&enterTimed != 0 {
			now = m.now()
		} else {
			now = m.nowIfNeeded()
		}
	}
	h := m.hash(domain)
	sh := m.shardOf(h)
	r := sh.records.get(h, domain)
	if r != nil {
		r.mu.Lock()
		if !r.dropped {
			return sh, r, now, nil
		}
	}
	// Kept apart, with its loop, so that the common case above keeps its
	// values in registers rather than on the stack.
	return m.enterAgain(c, sh, h, domain, now, r)
}

// enterAgain is the end of enter for a domain of sh, whose hash is h, that
// has no record (r is nil) or whose record Forget dropped (r, locked).
func (m *Manager) enterAgain(c *callSpec, sh *shard, h uint64, domain string, now instant, r *domainRecord) (*shard, *domainRecord, instant, error) {
	var dropped *domainRecord // the last record met that Forget had dropped
	for {
		if r != nil {
			// Forget dropped r after we found it. Its Forgotten record may
			// not be durable yet: wait for it, so that no answer depends on
			// a Forget a crash could undo (a failed wait closes the Manager,
			// which absent reports). Then look again: a record made now
			// takes r's place, and its queue of events, which may still
			// hold r's last ones (see deliver).
			seq := r.lastSeq
			r.mu.Unlock()
			if m.replaying == nil {
				_ = m.waitDurable(seq, nil)
			}
			dropped = r
			m.unlinkDrained(r)
			r = sh.records.get(h, domain)
		}
		if r == nil || r == dropped {
			if c.access&enterCreate == 0 {
				return sh, nil, 0, m.unknown(c, domain)
			}
			r = m.createRecord(sh, h, domain, dropped)
		}
		r.mu.Lock()
		if !r.dropped {
			return sh, r, now, nil
		}
	}
}

// enterWith is enter for a call that does more before it locks its
// domain: after the domain and the offset, it refuses the call's other
// arguments with c.invalid if bad is set; then it makes the ready queue if
// c.access says so (see pullQueue), and replaces *cause, a failure's
// cause, if cause is not nil, with the cause the domain's state keeps (see
// keepCause), which calls the cause's Error method: the caller's code,
// outside the lock.
func (m *Manager) enterWith(c *callSpec, domain string, offset int64, bad bool, cause *error) (*shard, *domainRecord, instant, error) {
	if !m.accepts(domain, offset) || bad {
		return nil, nil, 0, m.refuse(c, domain, offset)
	}
	if c.access&enterPull != 0 {
		m.pullQueue()
	}
	if cause != nil {
		*cause = keepCause(*cause, m.journal != nil)
	}
	return m.enter(c, domain, offset)
}

// unknown is the answer of the call c for domain, which the Manager does
// not know (see callSpec).
func (m *Manager) unknown(c *callSpec, domain string) error {
	switch {
	case c.access&enterUnchecked != 0:
		return nil
	case c.unknown != nil:
		return m.absent(domainError(c.op, domain, c.unknown))
	}
	return m.absent(nil)
}

// stepBuffer returns the buffer in which a call's step keeps its changes
// (see step), or nil if the Manager does not keep them. A Manager that
// reports its changes, to a journal or an observer, keeps them, in a
// buffer that stays on the calling function's stack: stepBuffer is small
// enough to be inlined, and inlined, the buffer it makes does not escape
// (go build -gcflags=-m says so; TestReportingCallsDoNotAllocate checks
// it) unless the caller hands the step to a function value, as adminCall
// does off the hot path. Keep stepBuffer that small. A call makes its
// step in place, as
//
//	st := step{now: now, kept: m.stepBuffer()}
//
// rather than from a function that returns a whole step: a step returned
// is built and then copied, and the copy reads it back right after the
// stores that built it, which the processor cannot forward to loads that
// span two of them, so the call waits for them to reach the cache.
func (m *Manager) stepBuffer() *[stepInline]change {
	if !m.reporting {
		return nil
	}
	return new([stepInline]change)
}

// finish ends st, a call's step on r, a record of sh that the caller
// locked: it counts the step's changes, journals them and queues their
// events (see report), brings the shard's expiry index up to date with r's
// lease and the ready queue, if the Manager keeps one, with r's
// readiness, and unlocks r. Then, unless the step is one of batch b's, it
// waits until the journal holds every record of the domain so far (the
// call's own, and those its answer depends on) and delivers r's events; a
// batch leaves both to endBatch, and finish returns nil. An error means
// the journal failed, which closed the Manager: the call returns it
// instead of its answer.
func (m *Manager) finish(sh *shard, r *domainRecord, st *step, b *batch) error {
	// The common case, a Manager in memory whose step made one change of
	// a kind the record counts itself, ends here without a call, and so
	// without keeping the arguments on the stack for one.
	if m.plain && st.n == 1 && m.ready.Load() == nil && sh.countHot(r, st.kinds[0]) {
		r.mu.Unlock()
		return nil
	}
	return m.finishAll(sh, r, st, b)
}

// finishAll is finish of any step.
func (m *Manager) finishAll(sh *shard, r *domainRecord, st *step, b *batch) error {
	// Most steps make one change, or two (SucceedNext's), of kinds the
	// record counts itself: count them without a loop (unless finish
	// did). The others may have made or ended the domain's dead letters.
	if !(st.n == 1 && sh.countHot(r, st.kinds[0]) || st.n == 2 && sh.countHotPair(r, st)) {
		sh.countAll(r, st)
		if st.touchesDeadLetters() {
			sh.syncDead(r)
		}
	}
	if m.plain && m.ready.Load() == nil {
		// Nothing to journal, tell, index or queue: a step of a Manager in
		// memory that finish did not end ends here.
		r.mu.Unlock()
		return nil
	}
	var appendErr error
	if m.reporting {
		appendErr = m.report(r, st)
	}
	if m.expiring {
		sh.expiry.sync(r)
	}
	if q := m.ready.Load(); q != nil {
		q.sync(r, st.now)
	}
	var seq uint64
	if m.journal != nil { // lastSeq sits in the record's third line: read it only if needed
		seq = r.lastSeq
	}
	r.mu.Unlock()
	if b != nil {
		b.seq, b.err = max(b.seq, seq), cmp.Or(b.err, appendErr)
		if m.observer != nil {
			b.touched = append(b.touched, r)
		}
	} else if m.journal != nil || m.observer != nil {
		if ferr := m.waitDurable(seq, appendErr); ferr != nil {
			return ferr
		}
		if m.observer != nil {
			m.deliver(r)
		}
	}
	return nil
}

// wrap returns err, an error of the call c on domain, wrapped (see
// domainError), or nil if err is nil. A call that ends with finish answers
// its state machine's error so:
//
//	if ferr := m.finish(sh, r, &st, nil); ferr != nil {
//		return …, ferr
//	}
//	return res, c.wrap(domain, err) // res is zero when err is not nil
func (c *callSpec) wrap(domain string, err error) error {
	if err == nil {
		return nil
	}
	return domainError(c.op, domain, err)
}

// report queues the changes st kept of r, which is locked, as events for
// the observer and appends them to the journal, as the Manager has either
// (see queueEvents, journalChanges). It returns the journal's error.
func (m *Manager) report(r *domainRecord, st *step) error {
	if m.observer != nil {
		m.queueEvents(r, st)
	}
	if m.journal != nil {
		return m.journalChanges(r, st)
	}
	return nil
}

// A batch is one call's passage through several domains, each in a step
// of its own that finish ends, but for the waits: the journal is waited
// for once, for every record the batch wrote or depends on, and the events
// are delivered after it (see endBatch).
type batch struct {
	seq     uint64          // the latest record of the domains touched
	err     error           // the journal's first append error; the batch stops at it
	touched []*domainRecord // whose events to deliver, with an observer
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
