package worklease

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// The pull calls: a producer stores offsets with their payloads (Enqueue),
// and workers claim the heads of ready domains (Claim, WaitClaim), each
// under a lease, and finish them with Succeed or SucceedMany, with
// ClaimNext to go on with the domains' next offsets, or with Retry to let
// another attempt wait out a delay without holding a worker. A
// domain's order, its single lease, its fences and its dead letters are
// the contract's, as with TryAcquire; the calls mix with the others.

// DefaultPoll is how long WaitClaim waits at most between two claims when
// nothing wakes it: a poll of 0 means it.
const DefaultPoll = time.Second

// A Claim is one lease Claim granted: the head of its domain, with what
// Enqueue stored with it.
type Claim struct {
	Domain    string
	Offset    int64
	Payload   []byte // nil if the offset was stored without one
	Token     Token
	Attempt   int       // this grant's attempt number: 1, then one more after each failed attempt
	ExpiresAt time.Time // zero if leases never expire
}

// A RetryResult is what Retry did.
type RetryResult struct {
	// DeadLettered: the offset ran out of retries and is failed, with the
	// cause given; otherwise it waits at the front of its domain's line.
	DeadLettered bool
	// RetryCount is the offset's failed attempts so far, this one
	// included: pass it to Backoff.Delay for the next delay. (Fail's
	// RetryCount counts the retries scheduled, not the attempts failed:
	// after a give-up they differ by one.)
	RetryCount int
}

// Enqueue stores offset at the back of domain's backlog (the front, with
// LIFO ordering) with payload, for Claim to lease in its turn. It never
// grants a lease itself, even on an idle domain. The status is Enqueued,
// also for an offset queued already, which is stored once, with the
// payload it was first stored with; AlreadyAcquired for the offset in
// flight; AlreadyProcessed or AlreadyFailed for a terminal one, whose
// answer does not change (until Redrive, or Forget), so that (domain,
// offset) is an idempotency key.
//
// A nil payload stores none. Enqueue keeps a copy of payload in memory
// until the offset succeeds: while it is queued, in flight and failed, so
// that a retry, a takeover after an expiry and a Redrive claim it with its
// payload again. A Manager with a journal keeps no payloads: for a payload
// that is not nil it returns an error matching ErrPayloadNotJournaled and
// changes nothing. Enqueue checks its domain and offset as TryAcquire
// does, first.
func (m *Manager) Enqueue(domain string, offset int64, payload []byte) (AcquireStatus, error) {
	if !m.accepts(domain, offset) {
		return 0, m.refuse("Enqueue", domain, offset)
	}
	if payload != nil && m.journal != nil {
		return 0, domainError("Enqueue", domain, ErrPayloadNotJournaled)
	}
	m.pullQueue()
	payload = bytes.Clone(payload) // the caller may reuse its buffer
	now := m.now()
	sh, r := m.lockRecord(domain, true)
	st := step{now: now}
	if m.reporting {
		var kept [stepInline]change
		st.kept = &kept // set here, not through a pointer: kept stays on the stack
	}
	status := r.state.enqueue(&m.policy, &st, offset, payload)
	if err := m.finish(sh, r, &st); err != nil {
		return 0, err
	}
	return status, nil
}

// Claim leases the heads of up to n ready domains and returns them with
// their payloads: domains that are idle, running, have offsets queued and
// whose retry delay, if any, is over, the longest waiting first. A domain
// whose offset just finished waits behind those ready before it, so that a
// long backlog does not starve the others. A claim first takes over up to
// n domains whose lease is due, the earliest first (the expiry counts as a
// failed attempt, as Reap counts it), so that a crashed worker's domain
// comes back without a separate Reap. Claim returns no claims, and no
// error, when nothing is ready.
//
// Each claim is a grant as TryAcquire of the head would make it: a new
// token with a higher fence, carried attempts, a TTL from now. Its
// Payload is a copy of the one stored, the caller's to keep.
//
// The Manager starts noting when its domains become ready at its first
// Enqueue, Claim, WaitClaim, ClaimNext or Retry: domains ready before then, and
// after a restart every domain ready, are claimed before those that become
// ready later, in no particular order among themselves. A retry's delay is
// not journaled: after a restart the offset is ready at once.
//
// Claim returns an error wrapping ErrInvalidClaim for n below 1, and
// ErrClosed once the Manager is closed; either way it changes nothing.
func (m *Manager) Claim(n int) ([]Claim, error) {
	if err := m.checkClaim("Claim", n); err != nil {
		return nil, err
	}
	q := m.pullQueue()
	now := m.now()
	var b batch
	if m.expiring {
		m.takeOver(now, n, &b)
	}
	var out []Claim
	for len(out) < n && b.err == nil {
		e, ok := q.pop(now)
		if !ok {
			break
		}
		if c, ok := m.claimEntry(q, &e, now, &b); ok {
			out = append(out, c)
		}
	}
	if err := m.endBatch(&b); err != nil {
		return nil, err
	}
	return out, nil
}

// checkClaim returns the error of the claim op for n leases, if any.
func (m *Manager) checkClaim(op string, n int) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("%w (%s of %d)", ErrInvalidClaim, op, n)
	}
	return nil
}

// claimEntry leases the head of e's domain if e, which the queue's pop
// returned, is still the domain's entry.
func (m *Manager) claimEntry(q *readyQueue, e *readyEntry, now instant, b *batch) (Claim, bool) {
	r := e.r
	r.mu.Lock()
	if !q.current(e) {
		// The domain stopped being ready after it was listed: a grant took
		// its head, say. If it is ready again, its new entry is behind.
		r.mu.Unlock()
		return Claim{}, false
	}
	st := step{now: now}
	if m.reporting {
		var kept [stepInline]change
		st.kept = &kept // set here, not through a pointer: kept stays on the stack
	}
	var c Claim
	granted := r.state.claim(&m.policy, &st)
	if granted {
		c = m.claimOf(r)
		r.streak = 0
	}
	m.release(b, m.shardOf(m.hash(r.domain)), r, &st) // a domain granted leaves the queue
	return c, granted
}

// claimOf returns the Claim of r's lease. r.mu must be held, and r leased.
func (m *Manager) claimOf(r *record) Claim {
	s := &r.state
	return Claim{
		Domain: r.domain, Offset: s.lease.offset, Payload: bytes.Clone(s.payloadOf(s.lease.offset)),
		Token: s.leaseToken(&m.policy), Attempt: s.attempts(), ExpiresAt: s.lease.expiresAt.in(m.loc),
	}
}

// takeOver revokes up to n leases that are due at now, the earliest first,
// as Reap revokes them: each expiry counts as a failed attempt, and its
// offset goes back to the front of its domain's line, which makes the
// domain ready, or to the dead letters.
func (m *Manager) takeOver(now instant, n int, b *batch) {
	type dueLease struct {
		sh *shard
		e  expiryEntry
	}
	var due []dueLease
	for i := range m.shards {
		sh := &m.shards[i]
		if !sh.expiry.dueBy(now) {
			continue
		}
		for _, e := range sh.expiry.popDue(now, nil) {
			due = append(due, dueLease{sh, e})
		}
	}
	slices.SortStableFunc(due, func(a, b dueLease) int { return cmp.Compare(a.e.at, b.e.at) })
	for i, d := range due {
		if i >= n || b.err != nil {
			d.sh.expiry.putBack(d.e.r)
			continue
		}
		_, ok, seq, err := m.reapOne(d.sh, d.e.r, now)
		b.seq, b.err = max(b.seq, seq), cmp.Or(b.err, err)
		if ok && m.observer != nil {
			b.touched = append(b.touched, d.e.r)
		}
	}
}

// WaitClaim is Claim that waits for work: when nothing is ready it waits
// until a call makes a domain ready (a Manager wakes one waiting claim for
// each, and a claim that comes back full wakes another if domains are
// left in the queue), the earliest retry delay ends, or poll has passed (0
// means DefaultPoll), and claims again, until it claims something, ctx
// ends, whose error it then returns, or the Manager is closed (ErrClosed). The poll only bounds a wait that nothing
// ends: a retry's delay read against a Clock given to WithClock, which
// does not move with real time, say. It starts no goroutine.
//
// WaitClaim checks n as Claim does, then ctx before each claim.
func (m *Manager) WaitClaim(ctx context.Context, n int, poll time.Duration) ([]Claim, error) {
	if err := m.checkClaim("WaitClaim", n); err != nil {
		return nil, err
	}
	if poll <= 0 {
		poll = DefaultPoll
	}
	q := m.pullQueue()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		claims, err := m.Claim(n)
		if len(claims) == n && q.more() {
			q.wake() // another waiting claim takes the rest
		}
		if err != nil || len(claims) > 0 {
			return claims, err
		}
		wait := poll
		if at, ok := q.nextDelay(); ok {
			if d := time.Duration(at - m.now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-q.signal:
			if ctx.Err() != nil {
				q.wake() // this claim leaves: the wake-up is another's
			}
		case <-q.done: // the next claim says why
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Retry ends tok's lease on domain as a failed attempt without holding a
// worker while the offset waits: if it has retries left (see
// WithMaxRetries) the offset goes back to the front of its domain's line,
// keeping its attempts, and the domain becomes ready for Claim once delay
// has passed, for any worker; in FIFO order nothing of the domain
// overtakes it (with LIFO ordering a later offset goes in front, as
// always; Pause and Resume end the delay, and so does TryAcquire of the
// offset, which grants it at once, as do Kill of the offset and Redrive of
// another, which put another offset at the head). Otherwise the offset becomes a dead
// letter with cause, as Fail would make it. The token is spent either
// way: Succeed, Fail and Extend with it then answer as for any lease that
// ended (ErrNoLease, or ErrTokenMismatch once the domain is leased again).
//
// Retry returns the errors of Fail, checked in the same order, and an
// error wrapping ErrInvalidDuration for a negative delay, checked after
// the domain; either way it changes nothing but the revocation of an
// expired lease. With a journal it writes the records of a Fail that
// schedules a retry followed by a requeue; the delay is not journaled.
func (m *Manager) Retry(domain string, tok Token, cause error, delay time.Duration) (RetryResult, error) {
	if !m.accepts(domain, 0) {
		return RetryResult{}, m.refuse("Retry", domain, 0)
	}
	if delay < 0 {
		return RetryResult{}, domainError("Retry", domain, ErrInvalidDuration)
	}
	q := m.pullQueue()
	now := m.now()
	cause = keepCause(cause, m.journal != nil)
	sh, r := m.lockRecord(domain, false)
	if r == nil {
		return RetryResult{}, m.absent(domainError("Retry", domain, ErrNoLease))
	}
	st := step{now: now}
	if m.reporting {
		var kept [stepInline]change
		st.kept = &kept // set here, not through a pointer: kept stays on the stack
	}
	res, err := r.state.retry(&m.policy, &st, tok, cause)
	if err == nil && !res.DeadLettered {
		q.sync(r, now, now.add(delay)) // listed now, finish leaves it where it is
	}
	if ferr := m.finish(sh, r, &st); ferr != nil {
		return RetryResult{}, ferr
	}
	if err != nil {
		return RetryResult{}, domainError("Retry", domain, err)
	}
	return res, nil
}

// SucceedMany is Succeed for each claim's lease, in the order of claims,
// and returns nil for each lease that succeeded and Succeed's error for
// each that did not. A domain with offsets queued becomes ready for Claim,
// behind the domains ready before it; SucceedMany hints at no next offset.
// It returns an error of its own, and no errors for the claims, if the
// Manager is closed, or if the journal failed (ErrJournalFailed): with a
// journal, it waits once for all the records it wrote.
func (m *Manager) SucceedMany(claims []Claim) ([]error, error) {
	_, errs, err := m.succeedMany("SucceedMany", claims, false)
	return errs, err
}

// MaxStreak is how many leases in a row ClaimNext grants a domain since
// Claim last claimed it; the next time, the domain goes behind the other
// ready domains instead, so that a worker that keeps going through one
// deep backlog does not starve the others. Every backend counts the same.
const MaxStreak = 8

// ClaimNext is SucceedMany, and in the same step, under each domain's
// lock, the claim for the caller of the next offset of each domain whose
// lease it ended, as Claim would claim it: the head of its backlog, with
// its payload, under a new lease (a new token with a higher fence, the
// attempts it carries, a TTL from now). A domain whose next offset it does
// not lease, because it has none queued, is paused, or was leased
// MaxStreak times in a row by ClaimNext since Claim last claimed it,
// becomes ready for Claim as SucceedMany leaves it, behind the domains
// ready before it. Only the first claim of a domain that claims name more
// than once may lead to a next lease: the later ones are answered as
// Succeed would answer them, after it, and a lease the call granted that
// such a later claim ends is not among the leases returned.
//
// ClaimNext returns the leases it granted, in the order of the claims
// that led to them, and for each claim nil or Succeed's error, as
// SucceedMany does; its own error is SucceedMany's. With a journal it
// writes the records of a Succeed followed by those of a grant.
//
// ClaimNext may be repeated, as after an error that left unknown whether
// it went through: a claim whose lease it ended already, with the next
// lease granted to its caller, is answered with that lease again, nil for
// an error, and nothing changes, for as long as that next lease is in
// flight. Once it ended or expired, or after a restart, the repeated
// claim gets Succeed's error for a spent token.
func (m *Manager) ClaimNext(claims []Claim) ([]Claim, []error, error) {
	return m.succeedMany("ClaimNext", claims, true)
}

// succeedMany is SucceedMany, and ClaimNext if next is set; op is the
// call's name.
func (m *Manager) succeedMany(op string, claims []Claim, next bool) ([]Claim, []error, error) {
	if err := m.checkOpen(); err != nil {
		return nil, nil, err
	}
	if next {
		m.pullQueue()
	}
	errs := make([]error, len(claims))
	var out []Claim
	var b batch
	var named map[string]bool // the domains of the claims so far, in a batch too long to search
	for i := 0; i < len(claims) && b.err == nil; i++ {
		c := &claims[i]
		if !m.accepts(c.Domain, 0) {
			errs[i] = m.refuse(op, c.Domain, 0)
			continue
		}
		// A domain's first claim ends its streak or carries it on; the
		// later ones are plain Succeeds, as the PostgreSQL backend
		// answers them.
		first := true
		if len(claims) <= 16 {
			for j := range i {
				if claims[j].Domain == c.Domain {
					first = false
					break
				}
			}
		} else {
			if named == nil {
				named = make(map[string]bool, len(claims))
			}
			first = !named[c.Domain]
			named[c.Domain] = true
		}
		granted, ok, err := m.succeedIn(&b, op, c.Domain, c.Token, first, next)
		errs[i] = err
		if ok {
			out = append(out, granted)
		} else if err == nil && !first && len(out) > 0 {
			// A later claim of a domain may end the lease its first
			// claim was just answered with (a ClaimNext repeated beside
			// that lease): the answer must not hand it out again.
			out = slices.DeleteFunc(out, func(g Claim) bool { return g.Domain == c.Domain && g.Token == c.Token })
		}
	}
	if err := m.endBatch(&b); err != nil {
		return nil, nil, err
	}
	return out, errs, nil
}

// succeedIn is Succeed of tok's lease on domain, in b, for op. If the
// claim is its domain's first of the batch, a success ends the domain's
// streak, or, with next, carries it on with the claim of the domain's next
// offset, which it returns.
func (m *Manager) succeedIn(b *batch, op, domain string, tok Token, first, next bool) (Claim, bool, error) {
	var now instant
	if next {
		now = m.now() // a grant records when
	} else {
		now = m.nowIfNeeded()
	}
	sh, r := m.lockRecord(domain, false)
	if r == nil {
		return Claim{}, false, m.absent(domainError(op, domain, ErrNoLease))
	}
	st := step{now: now}
	if m.reporting {
		var kept [stepInline]change
		st.kept = &kept // set here, not through a pointer: kept stays on the stack
	}
	var c Claim
	granted := false
	var err error
	if next && first && r.state.chainedFrom(&m.policy, &st, tok) {
		// A ClaimNext repeated: its lease ended already, with the next
		// lease granted to its caller, who did not hear of it.
		c, granted = m.claimOf(r), true
	} else {
		var res SucceedResult
		err = r.state.succeed(&m.policy, &st, tok, &res)
		if err == nil && first {
			if next && r.streak < MaxStreak && r.state.claim(&m.policy, &st) {
				c, granted = m.claimOf(r), true
				r.state.chained = true
				r.streak++
			} else {
				r.streak = 0
			}
		}
	}
	m.release(b, sh, r, &st)
	if err != nil {
		return Claim{}, false, domainError(op, domain, err)
	}
	return c, granted, nil
}

// A batch is one call's passage through several domains, each in a step
// of its own that ends as finish ends a call, but for the waits: the
// journal is waited for once, for every record the batch wrote or depends
// on, and the events are delivered after it (see endBatch).
type batch struct {
	seq     uint64    // the latest record of the domains touched
	err     error     // the journal's first append error; the batch stops at it
	touched []*record // whose events to deliver, with an observer
}

// release ends a step on r, a record of sh locked by the caller, in b: it
// counts and reports the step's changes and brings the expiry index and
// the ready queue up to date, as finish does, and releases r's lock.
func (m *Manager) release(b *batch, sh *shard, r *record, st *step) {
	sh.countAll(r, st)
	if m.reporting {
		b.err = cmp.Or(b.err, m.report(sh, r, st))
	}
	if m.expiring {
		sh.expiry.sync(r)
	}
	if q := m.ready.Load(); q != nil {
		q.sync(r, st.now, st.now)
	}
	if m.journal != nil {
		b.seq = max(b.seq, r.lastSeq)
	}
	r.mu.Unlock()
	if m.observer != nil {
		b.touched = append(b.touched, r)
	}
}

// endBatch ends b: it waits until the journal holds every record b depends
// on, and delivers the events of the domains it touched. An error means
// the journal failed, and the Manager is closed.
func (m *Manager) endBatch(b *batch) error {
	if m.journal != nil && (b.seq > 0 || b.err != nil) {
		if err := m.durable(b.seq, b.err); err != nil {
			return err
		}
	}
	for _, r := range b.touched {
		m.deliver(r)
	}
	return nil
}
