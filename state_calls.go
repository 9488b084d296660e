package worklease

import "time"

// A step is one call's passage through the state machine: the time it
// happens at, and what the call changed. The caller owns it, on its stack,
// and reads the changes once the call returns: their kinds always (to count
// them), and the changes themselves if it keeps them (to journal or report
// them; tests of the state machine do too), in a buffer of its own.
type step struct {
	now   instant
	n     int                   // changes made
	kinds [stepInline]EventKind // the kinds of the first stepInline changes
	kept  *[stepInline]change   // if kept, the first stepInline changes (see keep)
	spill *stepSpill            // the changes after the first stepInline, in the rare call that makes more
}

// stepInline is how many changes a step holds in place: as many as a call
// makes but for an admin call on an expired lease.
const stepInline = 4

// stepSpill holds the changes of a step after its first stepInline. It is
// behind a pointer so that a step's buffer, on its caller's stack, stays
// there.
type stepSpill struct {
	kinds []EventKind
	kept  []change
}

// add notes c, a change the call made and applied.
func (st *step) add(c *change) {
	if k := st.note(c.kind); k != nil {
		*k = *c
	}
}

// note notes a change of kind k, which the call made and applied. If the
// caller keeps the changes themselves, it returns where the call writes
// this one, a zero change; otherwise nil. The calls on the hot path note
// their changes this way, so that they build one only when it is kept.
func (st *step) note(k EventKind) *change {
	i := st.n
	st.n++
	if i < stepInline {
		st.kinds[i] = k
		if st.kept == nil {
			return nil
		}
		return &st.kept[i]
	}
	if st.spill == nil {
		st.spill = new(stepSpill)
	}
	st.spill.kinds = append(st.spill.kinds, k)
	if st.kept == nil {
		return nil
	}
	st.spill.kept = append(st.spill.kept, change{})
	return &st.spill.kept[len(st.spill.kept)-1]
}

// kind returns the kind of the i-th change, i in [0, n).
func (st *step) kind(i int) EventKind {
	if i < stepInline {
		return st.kinds[i]
	}
	return st.spill.kinds[i-stepInline]
}

// touchesDeadLetters reports whether the step made or ended a dead letter,
// or dropped the domain.
func (st *step) touchesDeadLetters() bool {
	for i := range st.n {
		switch st.kind(i) {
		case EventDeadLettered, EventRedriven, EventForgotten:
			return true
		}
	}
	return false
}

// change returns the i-th change, i in [0, n), of a step that keeps them.
func (st *step) change(i int) *change {
	if i < stepInline {
		return &st.kept[i]
	}
	return &st.spill.kept[i-stepInline]
}

// The calls below are the contract's, one domain at a time. Each first
// revokes the lease if it has expired (see expireIfDue), then decides
// from the state what happens, and makes it happen only through changes
// (see change), each applied as it is made: so a journal's records, which
// replay applies with the same code, rebuild the state exactly.

// acquire is TryAcquire. With Acquired or AlreadyAcquired, s.lease is the
// lease to report. A strict domain asked for an offset out of turn returns
// a *BacklogOrderError without its Domain, which the caller knows.
func (s *domainState) acquire(p *policy, st *step, offset int64) (AcquireStatus, error) {
	s.expireIfDue(p, st)
	// 1) Terminal checks.
	if s.isProcessed(p, offset) {
		return AlreadyProcessed, nil
	}
	if s.isFailed(offset) {
		return AlreadyFailed, nil
	}
	// 2) Active lease exists (or the domain is paused, which queues
	// everything as if one did).
	if s.leased && offset == s.lease.offset {
		return AlreadyAcquired, nil
	}
	if s.leased || s.paused {
		s.queueUp(p, st, offset)
		return Enqueued, nil
	}
	// 3) No active lease: only the backlog's head may be granted, and not
	// before its time, if it is scheduled (nor, out of turn, an offset
	// scheduled for later).
	if head, ok := s.backlog.front(); ok {
		if s.cold != nil && s.headWaits(st.now) {
			s.queueUp(p, st, offset)
			return Enqueued, nil
		}
		if head != offset {
			if !p.bestEffort {
				return 0, &BacklogOrderError{Expected: head, Got: offset}
			}
			if s.cold != nil && s.scheduledAt(offset) > st.now {
				return Enqueued, nil // queued, and not due: out of turn it waits for its time too
			}
			st.add(&change{kind: EventOutOfOrder, offset: offset})
		}
	}
	s.grant(p, st, offset)
	return Acquired, nil
}

// queueUp is TryAcquire of an offset the domain does not grant now: it
// joins the backlog, unless it is queued already, which changes nothing.
func (s *domainState) queueUp(p *policy, st *step, offset int64) {
	if s.applyEnqueued(offset, p.lifo) {
		if c := st.note(EventEnqueued); c != nil {
			*c = change{kind: EventEnqueued, offset: offset, front: p.lifo}
		}
	}
}

// grant leases offset under a new token, carrying on the attempts it made
// before, if any.
func (s *domainState) grant(p *policy, st *step, offset int64) {
	l, attempts := lease{offset: offset, acquiredAt: st.now}, 1
	if s.cold != nil {
		if a, ok := s.carriedOf(offset); ok {
			l.retries, l.acquiredAt, attempts = a.retries, a.acquiredAt, a.attempts+1
		}
	}
	if p.ttl > 0 {
		l.expiresAt = st.now.add(p.ttl)
	}
	tok := Token{fence: s.issued.fence + 1, serial: s.issued.serial, instance: p.instance}
	s.applyAcquired(p, l, tok, attempts)
	if c := st.note(EventAcquired); c != nil {
		c.setAcquired(l, tok, attempts)
	}
}

// grantHead leases the backlog's head, as acquire does when asked for it on
// an idle, running domain. The backlog must not be empty.
func (s *domainState) grantHead(p *policy, st *step) {
	head, _ := s.backlog.front()
	s.grant(p, st, head)
}

// holds reports whether tok is the current lease's token: Succeed, Fail,
// Retry and Extend go ahead only then, and otherwise answer what reject
// returns, as
//
//	if !s.holds(p, tok) {
//		return s.reject(st, tok)
//	}
func (s *domainState) holds(p *policy, tok Token) bool {
	return s.leased && tok == s.leaseToken(p)
}

// reject returns the error Succeed, Fail, Retry or Extend returns for tok,
// a token that is not the lease's (see holds), and reports it as a
// rejection. It is a call of its own, rather than part of holds, so that
// holds is small enough to inline: the call costs only the rejections.
func (s *domainState) reject(st *step, tok Token) error {
	var err error
	revoked, why := s.revoked()
	switch {
	case !tok.IsZero() && tok == revoked:
		err = why
	case !s.leased:
		err = ErrNoLease
	default:
		err = ErrTokenMismatch
	}
	offset := int64(-1)
	if s.leased {
		offset = s.lease.offset
	}
	st.add(&change{kind: EventRejected, offset: offset, token: tok, cause: err})
	return err
}

// succeed is Succeed. It fills in res's Status and Next; res must be zero.
func (s *domainState) succeed(p *policy, st *step, tok Token, res *SucceedResult) error {
	s.expireIfDue(p, st)
	if !s.holds(p, tok) {
		return s.reject(st, tok)
	}
	if c := st.note(EventProcessed); c != nil {
		// Field by field, as setAcquired: every cycle comes here.
		c.kind, c.offset, c.attempt, c.token = EventProcessed, s.lease.offset, s.attempts(), tok
	}
	s.applyProcessed(p, s.lease.offset)
	res.Status = NoBacklog
	if next, ok := s.backlog.front(); ok {
		res.Status, res.Next = NextHint, next
	}
	return nil
}

// fail is Fail. It fills in res's Status, RetryCount and Next; res must be
// zero.
func (s *domainState) fail(p *policy, st *step, tok Token, cause error, res *FailResult) error {
	s.expireIfDue(p, st)
	if !s.holds(p, tok) {
		return s.reject(st, tok)
	}
	l := &s.lease
	if l.retries < p.maxRetries {
		// acquiredAt stays: it marks the offset's first grant. The next
		// attempt gets at least a full TTL.
		retries, expiresAt := l.retries+1, l.expiresAt
		if at := st.now.add(p.ttl); p.ttl > 0 && at > expiresAt {
			expiresAt = at
		}
		s.applyRetrying(retries, expiresAt)
		if c := st.note(EventRetrying); c != nil {
			*c = change{
				kind: EventRetrying, offset: l.offset, attempt: retries, token: tok, cause: cause,
				retries: retries, acquiredAt: l.acquiredAt, expiresAt: expiresAt,
			}
		}
		res.Status, res.RetryCount = RetryScheduled, retries
		return nil
	}
	res.RetryCount = l.retries
	s.deadLetter(p, st, l.offset, s.attempts(), tok, cause, p.park)
	switch next, ok := s.backlog.front(); {
	case s.paused:
		res.Status = GiveUpParked
	case ok:
		res.Status, res.Next = GiveUpNextHint, next
	default:
		res.Status = GiveUpNoBacklog
	}
	return nil
}

// succeedNext is SucceedNext: succeed, then the grant of the backlog's head
// unless the domain is paused. With NextAcquired, s.lease is the lease to
// report.
func (s *domainState) succeedNext(p *policy, st *step, tok Token, res *SucceedResult) error {
	if err := s.succeed(p, st, tok, res); err != nil || res.Status != NextHint || s.paused || s.headWaits(st.now) {
		return err
	}
	s.grantHead(p, st)
	res.Status, res.Next = NextAcquired, 0
	return nil
}

// failNext is FailNext: fail, then, if that gave the offset up on a running
// domain with a backlog, the grant of its head. With GiveUpNextAcquired,
// s.lease is the lease to report.
func (s *domainState) failNext(p *policy, st *step, tok Token, cause error, res *FailResult) error {
	// fail hints at the head only if the domain is not paused; a head
	// scheduled for later stays a hint.
	if err := s.fail(p, st, tok, cause, res); err != nil || res.Status != GiveUpNextHint || s.headWaits(st.now) {
		return err
	}
	s.grantHead(p, st)
	res.Status, res.Next = GiveUpNextAcquired, 0
	return nil
}

// enqueue is Enqueue and EnqueueAt: acquire that never grants, even on an
// idle domain. An offset it queues keeps what put holds (if not nil), and
// may be granted no earlier than notBefore, if that is after now. For an
// offset the domain holds already it changes nothing, and returns, with
// the offset's status, the payload the offset is stored with, if any, for
// the caller to compare with its own: a terminal offset's payload is gone.
func (s *domainState) enqueue(p *policy, st *step, offset int64, put *enqueueData, notBefore instant) (AcquireStatus, payload, bool) {
	s.expireIfDue(p, st)
	switch {
	case s.isProcessed(p, offset):
		return AlreadyProcessed, payload{}, false
	case s.isFailed(offset):
		pl, ok := s.payloadOf(offset)
		return AlreadyFailed, pl, ok
	case s.leased && offset == s.lease.offset:
		pl, ok := s.payloadOf(offset)
		return AlreadyAcquired, pl, ok
	case s.backlog.contains(offset):
		pl, ok := s.payloadOf(offset)
		return AlreadyQueued, pl, ok
	}
	c := change{kind: EventEnqueued, offset: offset, front: p.lifo, put: put}
	if notBefore > st.now {
		c.notBefore = notBefore
	}
	s.make(p, st, &c)
	return Enqueued, payload{}, false
}

// appendNext is Append: it queues the offset after every offset the domain
// holds (see nextOffset), with put's payload and key, as enqueue would.
// With a key that an Append within the key window was made with, it
// changes nothing and returns that Append's offset and its status, or
// ErrPayloadMismatch if that Append's payload was another.
func (s *domainState) appendNext(p *policy, st *step, put *enqueueData, notBefore instant) (AppendResult, error) {
	s.expireIfDue(p, st)
	if put.key != "" {
		if k, ok := s.keyed(p, put.key, st.now); ok {
			if k.sum != put.sum {
				return AppendResult{}, ErrPayloadMismatch
			}
			return AppendResult{Offset: k.offset, Status: s.stateOf(p, k.offset)}, nil
		}
	}
	offset, ok := s.nextOffset()
	if !ok {
		return AppendResult{}, ErrInvalidOffset // every offset up to math.MaxInt64 is taken
	}
	status, _, _ := s.enqueue(p, st, offset, put, notBefore)
	return AppendResult{Offset: offset, Status: status}, nil
}

// claim is Claim on a domain the Manager found ready: if it is (see
// ready), it leases the backlog's head, as TryAcquire of the head would,
// starts the domain's streak over, and reports that it did. With true,
// s.lease is the lease to report.
func (s *domainState) claim(p *policy, st *step) bool {
	if !s.claimHead(p, st) {
		return false
	}
	s.streak = 0
	return true
}

// claimHead leases the backlog's head if the domain is ready, and reports
// whether it did.
func (s *domainState) claimHead(p *policy, st *step) bool {
	s.expireIfDue(p, st)
	if !s.ready() || s.headWaits(st.now) {
		return false
	}
	s.grantHead(p, st)
	return true
}

// succeedMany is SucceedMany's Succeed of tok's lease, for the first of
// the call's claims that names the domain: a success ends the domain's
// streak. (The later claims of the domain are plain Succeeds.)
func (s *domainState) succeedMany(p *policy, st *step, tok Token) error {
	var res SucceedResult
	if err := s.succeed(p, st, tok, &res); err != nil {
		return err
	}
	s.streak = 0
	return nil
}

// claimNext is ClaimNext's Succeed of tok's lease, for the first of the
// call's claims that names the domain, followed by the claim of the
// domain's next offset, chained to tok's lease, unless the domain's streak
// reached MaxStreak; a success that claims nothing ends the streak. A
// ClaimNext repeated after it ended tok's lease (see chainedFrom) is
// answered with the lease it chained then, and changes nothing. claimNext
// reports whether s.lease is a lease to report.
func (s *domainState) claimNext(p *policy, st *step, tok Token) (bool, error) {
	if s.chainedFrom(p, st, tok) {
		return true, nil
	}
	var res SucceedResult
	if err := s.succeed(p, st, tok, &res); err != nil {
		return false, err
	}
	if s.streak < MaxStreak && s.claimHead(p, st) {
		s.chained = true
		s.streak++
		return true, nil
	}
	s.streak = 0
	return false, nil
}

// chainedFrom first revokes a due lease, then reports whether ClaimNext
// granted the lease in flight as it ended tok's, the lease before it.
func (s *domainState) chainedFrom(p *policy, st *step, tok Token) bool {
	s.expireIfDue(p, st)
	return s.leased && s.chained && s.issued.fence > 1 &&
		tok == Token{fence: s.issued.fence - 1, serial: s.issued.serial, instance: p.instance}
}

// retry is Retry: the attempt under tok failed. With retries left, the
// lease ends and its offset goes back to the front of the line, carrying
// its attempts, to wait out delay (see domainCold.retryAt); without, the
// offset is dead-lettered, as fail would do. Either way the token is
// spent.
func (s *domainState) retry(p *policy, st *step, tok Token, cause error, delay time.Duration) (RetryResult, error) {
	s.expireIfDue(p, st)
	if !s.holds(p, tok) {
		return RetryResult{}, s.reject(st, tok)
	}
	l := s.lease
	if l.retries >= p.maxRetries {
		s.deadLetter(p, st, l.offset, s.attempts(), tok, cause, p.park)
		return RetryResult{DeadLettered: true, RetryCount: l.retries + 1}, nil
	}
	// The failed attempt is counted as Fail counts it, and the requeue
	// that follows ends the lease (see applyRequeued).
	attempts, retries := s.attempts(), l.retries+1
	s.make(p, st, &change{
		kind: EventRetrying, offset: l.offset, attempt: retries, token: tok, cause: cause,
		retries: retries, acquiredAt: l.acquiredAt, expiresAt: l.expiresAt,
	})
	c := change{kind: EventRequeued, offset: l.offset, attempt: attempts, retries: retries, acquiredAt: l.acquiredAt}
	if delay > 0 {
		c.notBefore = st.now.add(delay)
	}
	s.make(p, st, &c)
	return RetryResult{RetryCount: retries}, nil
}

// extend is Extend: the lease now expires no sooner than d from now. It
// returns the lease's expiry, zero if it never expires.
func (s *domainState) extend(p *policy, st *step, tok Token, d time.Duration) (instant, error) {
	s.expireIfDue(p, st)
	if !s.holds(p, tok) {
		return 0, s.reject(st, tok)
	}
	if s.lease.expiresAt == 0 {
		return 0, nil // the lease never expires; nothing to extend
	}
	if at := st.now.add(d); at > s.lease.expiresAt {
		s.extendTo(p, st, at)
	}
	return s.lease.expiresAt, nil
}

// extendTo moves the lease's expiry to at, which is later.
func (s *domainState) extendTo(p *policy, st *step, at instant) {
	l := &s.lease
	s.make(p, st, &change{
		kind: EventExtended, offset: l.offset, attempt: s.attempts(), token: s.leaseToken(p),
		retries: l.retries, acquiredAt: l.acquiredAt, expiresAt: at,
	})
}

// make applies c, a change of the call st, and notes it.
func (s *domainState) make(p *policy, st *step, c *change) {
	s.apply(p, st.now, c)
	st.add(c)
}

// expireIfDue revokes the lease if it has expired, and reports whether it
// did. An expiry counts as a failed attempt: with retries left, the offset
// goes back to the front of the line to be granted again under a new token;
// without, it is dead-lettered.
func (s *domainState) expireIfDue(p *policy, st *step) bool {
	// A domain without a lease has the zero lease, which never expires.
	if s.lease.expiresAt == 0 || st.now < s.lease.expiresAt {
		return false
	}
	return s.expire(p, st)
}

// expire is expireIfDue of a lease that is due. Kept apart, so that
// expireIfDue is small enough to inline in every call.
func (s *domainState) expire(p *policy, st *step) bool {
	if !s.leased {
		return false
	}
	l, tok, attempts := s.lease, s.leaseToken(p), s.attempts()
	s.make(p, st, &change{kind: EventExpired, offset: l.offset, attempt: attempts, token: tok})
	if l.retries < p.maxRetries {
		s.requeue(p, st, l.offset, attempt{attempts: attempts, retries: l.retries + 1, acquiredAt: l.acquiredAt})
	} else {
		s.deadLetter(p, st, l.offset, attempts, tok, ErrLeaseExpired, p.park)
	}
	return true
}

// requeue puts offset back at the front of the line, keeping its attempts:
// how many were made, and how many of them failed, which the next grant
// carries on from.
func (s *domainState) requeue(p *policy, st *step, offset int64, a attempt) {
	s.make(p, st, &change{kind: EventRequeued, offset: offset, attempt: a.attempts, retries: a.retries, acquiredAt: a.acquiredAt})
}

// deadLetter makes offset failed after attempts attempts, and parks the
// domain if park is set. A lease on offset ends with it.
func (s *domainState) deadLetter(p *policy, st *step, offset int64, attempts int, tok Token, cause error, park bool) {
	s.make(p, st, &change{kind: EventDeadLettered, offset: offset, attempt: attempts, token: tok, cause: cause})
	if park && !s.paused {
		s.make(p, st, &change{kind: EventPaused, offset: offset, cause: cause})
	}
}

// kill is Kill: it makes offset failed whatever its state, with cause.
func (s *domainState) kill(p *policy, st *step, offset int64, cause error) error {
	s.expireIfDue(p, st)
	inFlight := s.leased && s.lease.offset == offset
	switch {
	case s.isProcessed(p, offset):
		return ErrAlreadyProcessed
	case s.isFailed(offset):
		return nil
	case p.monotonic && !inFlight && !s.backlog.contains(offset):
		return ErrOffsetAhead // not processed, so above the highest finished offset
	}
	attempts, tok := 0, Token{}
	switch {
	case inFlight:
		attempts, tok = s.attempts(), s.leaseToken(p)
	case s.backlog.contains(offset):
		a, _ := s.carriedOf(offset)
		attempts = a.attempts
	}
	s.make(p, st, &change{kind: EventKilled, offset: offset, attempt: attempts, token: tok, cause: cause})
	s.deadLetter(p, st, offset, attempts, tok, cause, false) // a deliberate kill does not park
	return nil
}

// cancel is Cancel: it ends a queued or scheduled offset, and the offset
// in flight if inFlight is set (its holder loses the lease), so that it
// never runs. A cancelled offset counts as processed.
func (s *domainState) cancel(p *policy, st *step, offset int64, inFlight bool) error {
	s.expireIfDue(p, st)
	switch {
	case s.isProcessed(p, offset):
		return ErrAlreadyProcessed
	case s.leased && s.lease.offset == offset:
		if !inFlight {
			return ErrInFlight
		}
		s.make(p, st, &change{kind: EventCancelled, offset: offset, attempt: s.attempts(), token: s.leaseToken(p)})
	case s.backlog.contains(offset):
		a, _ := s.carriedOf(offset)
		s.make(p, st, &change{kind: EventCancelled, offset: offset, attempt: a.attempts})
	default:
		return ErrNotQueued // never seen, or failed
	}
	return nil
}

// redrive is Redrive: it puts a failed offset back at the front of the
// line.
func (s *domainState) redrive(p *policy, st *step, offset int64) error {
	s.expireIfDue(p, st)
	if !s.isFailed(offset) {
		return ErrNotDeadLettered
	}
	s.make(p, st, &change{kind: EventRedriven, offset: offset})
	return nil
}

// forceRelease is ForceRelease: it takes the lease back from its holder
// and puts its offset back at the front of the line.
func (s *domainState) forceRelease(p *policy, st *step) error {
	s.expireIfDue(p, st)
	if !s.leased {
		return ErrNoLease
	}
	l, tok, attempts := s.lease, s.leaseToken(p), s.attempts()
	s.make(p, st, &change{kind: EventReleased, offset: l.offset, attempt: attempts, token: tok})
	s.requeue(p, st, l.offset, attempt{attempts: attempts, retries: l.retries, acquiredAt: l.acquiredAt})
	return nil
}

// setPaused is Pause (paused set) and Resume.
func (s *domainState) setPaused(p *policy, st *step, paused bool) {
	s.expireIfDue(p, st)
	if s.paused == paused {
		return
	}
	kind := EventResumed
	if paused {
		kind = EventPaused
	}
	s.make(p, st, &change{kind: kind, offset: -1})
}

// forget is Forget: it reports the domain forgotten if it is idle, running
// and has an empty backlog; the caller then drops it.
func (s *domainState) forget(p *policy, st *step) error {
	s.expireIfDue(p, st)
	if !s.empty() || s.paused {
		return ErrDomainBusy
	}
	st.add(&change{kind: EventForgotten, offset: -1})
	return nil
}
