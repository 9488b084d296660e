package worklease

import (
	"math"
	"slices"
	"time"
)

// domainState is one domain's state, which the state machine's calls
// (state_calls.go) change only through changes (state_changes.go): the
// contract's calls, plus the optional behaviour of time-limited leases,
// ordering modes, parking and the admin calls. It is pure: it knows nothing
// of locks, clocks, journals or observers, and nothing of the domain's key.
// The domainRecord that holds it locks its mutex around every call, and
// tests drive it directly (state_internal_test.go). The state machine's
// files (state*.go, backlog.go) use only each other and the vocabulary
// below them (results.go, events.go, errors.go, token.go, causes.go,
// limits.go, instant.go), never the Manager's files: TestLayers checks it.
//
// Its fields are laid out for the record's cache lines (see domainRecord):
// what a TryAcquire+Succeed cycle reads or writes comes first, and what only
// failures, expiries and operators need is behind cold, which most domains
// never allocate. The highest processed run ends the hot part; the other
// runs, rarely read, follow it in the record's third line.
type domainState struct {
	leased bool // whether lease is valid: the domain is in flight
	paused bool // grants nothing until resumed (Pause, or parked on a dead letter)
	// chained says that ClaimNext granted the lease as it ended the one
	// before (the previous fence): repeated with that lease's token, as
	// after an answer that was lost, ClaimNext answers with this lease
	// again (see chainedFrom). Every other grant clears it; not journaled.
	chained bool
	// streak counts the leases ClaimNext granted in a row since Claim last
	// claimed the domain (see MaxStreak), in the byte the flags leave
	// free; not journaled.
	streak uint8
	// released counts the forced releases in the history of the offset in
	// flight, zero when idle: the lease's attempts made are its
	// retries+1+released (see attempts). Part of the lease, it is kept
	// here, beside the flags, where it takes no room of its own.
	released uint32
	lease    lease // the current lease when leased; zero otherwise
	// issued is the fence of the latest grant (0 before the first) and this
	// domain's serial: with the Manager's instance they make the latest
	// grant's token. Fences only grow, so a token is never issued twice.
	issued issued
	// backlog is allocated by the first offset queued, and kept: a domain
	// that queued once is likely to queue again. A nil backlog is empty.
	backlog *backlog
	// cold holds what failures, expiries and operators leave behind; nil
	// while it would be empty, as it is for most domains.
	cold *domainCold
	// processed holds the offsets that succeeded (the failed ones are in
	// cold), terminal like them. With WithMonotonicOffsets, it is
	// instead empty or the one run [0, hw], hw being the highest terminal
	// offset; isProcessed says which offsets count as processed either way.
	processed offsetSet
}

// issued is what a domain needs to make its grants' tokens.
type issued struct {
	fence  uint64 // the latest grant's; 0 before the first
	serial uint64 // the domain's serial within its Manager; never 0
}

// domainCold is the part of a domain's state that most domains never have.
// It is allocated when one of its fields is first set, and dropped once
// all are zero again: a domain that never lost a lease without its holder
// (an expiry, a kill in flight, a forced release) drops it once its dead
// letters are redriven; one that did keeps it for the revoked token, which
// only the next such loss replaces. Like the rest of domainState, and the
// backlog, it is guarded by the record's mu.
type domainCold struct {
	// failed holds the offsets that were given up on or killed, terminal
	// like the processed ones, and why each failed.
	failed deadLetters
	// carried holds the history of offsets that went back into the backlog
	// after an attempt that did not end in Succeed or Fail (an expiry, a
	// forced release), so that their next grant keeps counting attempts.
	// nil unless there is one.
	carried map[int64]attempt
	// leaseToken is the current lease's token when it is not the latest
	// grant of this Manager: a lease that replay restored, granted by the
	// Manager that wrote the journal. Zero otherwise, and for every lease
	// this Manager grants.
	leaseToken Token
	// revoked is the token of the latest lease that ended without its
	// holder (expired, killed or force-released), so that the holder learns
	// why: Succeed, Fail and Extend with it return revokedErr.
	revoked    Token
	revokedErr error
	// payloads holds what Enqueue stored with an offset, from then until
	// the offset succeeds or is cancelled: while it is queued, in flight
	// or failed, so that a retry, a takeover and a Redrive claim it with
	// its payload. nil unless there is one. An Enqueued change carries the
	// payload, and the Manager may then leave its bytes in the journal
	// (see payload).
	payloads map[int64]payload
	// scheduled holds the queued offsets that may not be granted before a
	// time (EnqueueAt, Append with NotBefore), with their times; nil
	// unless there is one. While the backlog's head is scheduled for
	// later, the domain grants nothing (see headWaits).
	scheduled map[int64]instant
	// retryAt is when the retry delay that Retry gave the backlog's head
	// ends, zero if none: Claim leases the domain no earlier. Unlike a
	// schedule, it binds only Claim, and it ends as the Manager's ready
	// queue ended it before it was state: with a grant, a Pause or Resume,
	// and an operator's call that gives the backlog another head.
	retryAt instant
	// keys holds the idempotency keys of recent Appends; nil unless there
	// is one.
	keys *appendKeys
}

// lease is the offset in flight and its history, plus an expiry. Its token is the
// domain's latest grant (see domainState.leaseToken).
type lease struct {
	offset     int64
	acquiredAt instant // first grant of this offset; retries keep it
	expiresAt  instant // zero: never expires
	retries    int     // failed attempts of this offset so far
}

// describe fills in res's lease fields from l, whose token is tok, with
// times in loc.
func (l *lease) describe(res *AcquireResult, tok Token, loc *time.Location) {
	res.Token = tok
	res.AcquiredAt = l.acquiredAt.in(loc)
	res.ExpiresAt = l.expiresAt.in(loc)
	res.RetryCount = l.retries
}

// info describes l, the lease of domain under tok, with times in loc.
func (l *lease) info(domain string, tok Token, loc *time.Location) (info LeaseInfo) {
	l.fill(&info, domain, tok, loc)
	return info
}

// fill is info in place, for the results of the calls on the hot path.
func (l *lease) fill(info *LeaseInfo, domain string, tok Token, loc *time.Location) {
	info.Domain = domain
	info.Offset = l.offset
	info.Token = tok
	info.AcquiredAt = l.acquiredAt.in(loc)
	info.ExpiresAt = l.expiresAt.in(loc)
	info.RetryCount = l.retries
}

// attempts returns the attempts made by the offset in flight, this one
// included: one more than its failed attempts, plus the force-released
// ones.
func (s *domainState) attempts() int { return s.lease.retries + 1 + int(s.released) }

// attempt is what carries over from one grant of an offset to the next.
type attempt struct {
	attempts   int // attempts made, the last one included
	retries    int // failed attempts: an expiry is one, a forced release is not
	acquiredAt instant
}

// policy is the configuration the state machine reads. Immutable.
type policy struct {
	maxRetries int
	ttl        time.Duration // 0: leases never expire
	lifo       bool          // grant the newest queued offset first
	bestEffort bool          // allow acquiring a queued offset out of turn
	park       bool          // pause a domain when one of its offsets is dead-lettered
	monotonic  bool          // offsets only grow: processed is a watermark (WithMonotonicOffsets)
	keyWindow  time.Duration // how long Append keeps an idempotency key (WithKeyWindow)
	instance   uint64        // the Manager's instance, which its tokens carry
}

// issuedToken returns the token of the domain's latest grant by this
// Manager.
func (s *domainState) issuedToken(p *policy) Token {
	return Token{fence: s.issued.fence, serial: s.issued.serial, instance: p.instance}
}

// leaseToken returns the current lease's token; s must be leased.
func (s *domainState) leaseToken(p *policy) Token {
	if c := s.cold; c != nil && !c.leaseToken.IsZero() {
		return c.leaseToken
	}
	return s.issuedToken(p)
}

// coldPart returns s.cold, allocating it if need be.
func (s *domainState) coldPart() *domainCold {
	if s.cold == nil {
		s.cold = new(domainCold)
	}
	return s.cold
}

// trimCold drops s.cold once nothing is left in it.
func (s *domainState) trimCold() {
	if c := s.cold; c != nil && c.failed.m == nil && c.carried == nil && c.leaseToken.IsZero() && c.revoked.IsZero() &&
		c.payloads == nil && c.scheduled == nil && c.retryAt == 0 && c.keys == nil {
		s.cold = nil
	}
}

// failed returns the domain's dead letters; nil, which is empty, if it has
// none.
func (s *domainState) failed() *deadLetters {
	if s.cold == nil {
		return nil
	}
	return &s.cold.failed
}

// isFailed reports whether offset is failed.
func (s *domainState) isFailed(offset int64) bool {
	return s.cold != nil && s.cold.failed.contains(offset)
}

// removeFailed takes offset out of the failed set and reports whether it
// was there.
func (s *domainState) removeFailed(offset int64) bool {
	if s.cold == nil {
		return false
	}
	_, ok := s.cold.failed.remove(offset)
	s.trimCold()
	return ok
}

// queue returns the backlog, allocating it if need be, for an offset about
// to join it.
func (s *domainState) queue() *backlog {
	if s.backlog == nil {
		s.backlog = new(backlog)
	}
	return s.backlog
}

// carriedOf returns the attempts offset carries to its next grant.
func (s *domainState) carriedOf(offset int64) (attempt, bool) {
	if s.cold == nil || s.cold.carried == nil {
		return attempt{}, false
	}
	a, ok := s.cold.carried[offset]
	return a, ok
}

// carry records the attempts offset, which is queued, carries to its next
// grant.
func (s *domainState) carry(offset int64, a attempt) {
	c := s.coldPart()
	if c.carried == nil {
		c.carried = make(map[int64]attempt)
	}
	c.carried[offset] = a
}

// revoked returns the token of the latest lease that ended without its
// holder and why, or the zero Token.
func (s *domainState) revoked() (Token, error) {
	if s.cold == nil {
		return Token{}, nil
	}
	return s.cold.revoked, s.cold.revokedErr
}

// switchRule converts s, kept under the exact rule or, if it is set now,
// the watermark rule of WithMonotonicOffsets, to the other one. Switching
// on, hw becomes the highest terminal offset: every offset up to it that is
// not failed, queued or in flight then counts as processed. Switching off,
// the offsets that counted as processed stay processed, one run for each
// stretch between the failed, queued and leased offsets below hw, so that
// nothing finished is ever granted again.
func (s *domainState) switchRule(toMonotonic bool) {
	if toMonotonic {
		hw := int64(-1)
		if !s.processed.isEmpty() {
			hw = s.processed.last().hi
		}
		for _, off := range s.failed().offsets() {
			hw = max(hw, off)
		}
		if hw >= 0 {
			s.processed.raiseTo(hw)
		}
		return
	}
	if s.processed.isEmpty() {
		return
	}
	hw := s.processed.last().hi
	holes := s.failed().offsets() // every failed offset is at or below hw
	for i := range s.backlog.len() {
		if x := s.backlog.at(i); x <= hw {
			holes = append(holes, x)
		}
	}
	if s.leased && s.lease.offset <= hw {
		holes = append(holes, s.lease.offset)
	}
	slices.Sort(holes)
	var runs []offsetRun
	next := int64(0) // the first offset not yet placed
	for _, h := range slices.Compact(holes) {
		if h > next {
			runs = append(runs, offsetRun{next, h - 1})
		}
		if h == hw {
			next = -1 // nothing above hw
			break
		}
		next = h + 1
	}
	if next >= 0 {
		runs = append(runs, offsetRun{next, hw})
	}
	s.processed.setRuns(runs)
}

// isProcessed reports whether offset counts as processed: it succeeded or,
// with WithMonotonicOffsets, it is at or below the domain's highest terminal
// offset and is neither failed, queued nor in flight. Every check of
// whether an offset is processed goes through it.
func (s *domainState) isProcessed(p *policy, offset int64) bool {
	// In-order work asks of an offset past every processed one: that
	// answer takes one comparison, inlined, and the others a call.
	if s.processed.pastEnd(offset) {
		return false
	}
	return s.processedWithin(p, offset)
}

// processedWithin is isProcessed of an offset not past every processed
// one.
func (s *domainState) processedWithin(p *policy, offset int64) bool {
	if !s.processed.contains(offset) {
		return false
	}
	return !p.monotonic || s.processedBelowHigh(offset)
}

// processedBelowHigh is isProcessed, with WithMonotonicOffsets, of an
// offset the run [0, hw] holds.
func (s *domainState) processedBelowHigh(offset int64) bool {
	// The run [0, hw] holds the offsets below hw that are still to run, or
	// failed: they do not count.
	return !s.isFailed(offset) && !(s.leased && s.lease.offset == offset) && !s.backlog.contains(offset)
}

// processedCount is the number of offsets that count as processed, which
// Inspect reports. With WithMonotonicOffsets it is hw+1 less the failed,
// queued and leased offsets at or below hw (every failed offset is),
// saturating at math.MaxInt64 when hw is math.MaxInt64.
func (s *domainState) processedCount(p *policy) int64 {
	if !p.monotonic {
		return s.processed.len()
	}
	if s.processed.isEmpty() {
		return 0
	}
	hw := s.processed.last().hi
	pending := s.failed().len()
	for i := range s.backlog.len() {
		if s.backlog.at(i) <= hw {
			pending++
		}
	}
	if s.leased && s.lease.offset <= hw {
		pending++
	}
	if pending == 0 && hw == math.MaxInt64 {
		return math.MaxInt64 // hw+1 would overflow
	}
	return hw - pending + 1
}

// markTerminal records that offset reached a terminal state. Without
// WithMonotonicOffsets only a success touches processed; with it, every
// terminal offset raises the domain's highest terminal offset.
func (s *domainState) markTerminal(p *policy, offset int64, succeeded bool) {
	switch {
	case p.monotonic:
		s.processed.raiseTo(offset)
	case succeeded:
		s.processed.add(offset)
	}
}

// dropCarried forgets the attempts offset carried, if any.
func (s *domainState) dropCarried(offset int64) {
	if c := s.cold; c != nil && dropOffset(&c.carried, offset) {
		s.trimCold()
	}
}

// dropOffset deletes offset from *m, a map of the cold part, and drops the
// map once it is empty, which it reports: the cold part may then be empty
// too (see trimCold).
func dropOffset[V any](m *map[int64]V, offset int64) (dropped bool) {
	if *m == nil {
		return false
	}
	delete(*m, offset)
	if len(*m) > 0 {
		return false
	}
	*m = nil
	return true
}

// release clears the lease.
func (s *domainState) release() {
	s.leased = false
	s.lease = lease{}
	s.released = 0
	if s.cold != nil {
		s.releaseCold()
	}
}

// releaseCold drops the lease's token from the cold part, if it is kept
// there.
func (s *domainState) releaseCold() {
	if c := s.cold; !c.leaseToken.IsZero() {
		c.leaseToken = Token{}
		s.trimCold()
	}
}

// revoke ends the lease, whose token is tok, without its holder.
func (s *domainState) revoke(tok Token, why error) {
	c := s.coldPart()
	c.revoked, c.revokedErr = tok, why
	s.release()
}

// ready reports whether Claim may lease the domain's head: it is idle,
// running and has a backlog. (A retry's delay is the Manager's to keep.)
func (s *domainState) ready() bool { return !s.leased && !s.paused && s.backlog.len() > 0 }

// empty reports whether the domain has no lease and no backlog.
func (s *domainState) empty() bool { return !s.leased && s.backlog.len() == 0 }

// next reports the offset an idle, running domain will grant next at now:
// the one an orchestrator must acquire to keep the domain moving. A head
// scheduled for later is not granted before its time, and is not
// reported.
func (s *domainState) next(now instant) (int64, bool) {
	if s.leased || s.paused || s.headWaits(now) {
		return 0, false
	}
	return s.backlog.front()
}
