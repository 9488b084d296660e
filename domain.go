package worklease

import "time"

// domainState is one domain's state machine: the seed 000 contract, step by
// step. It does no locking and calls nothing outside the package; the record
// that owns it holds its mutex around every method, and tests drive it
// directly.
type domainState struct {
	leased  bool  // whether lease is valid: the domain is in flight
	lease   lease // the current lease when leased; zero otherwise
	backlog backlog
	// processed and failed are the terminal offsets (seed 000 "processed"
	// and "failed"): offsets that succeeded, and offsets that were given up.
	processed offsetSet
	failed    offsetSet
	// issued is the token of the latest grant, with the fence of that grant
	// (0 before the first) and this domain's fixed serial and instance.
	// Fences only grow, so a token is never issued twice.
	issued Token
}

// lease is the seed's LeaseRecord.
type lease struct {
	offset     int64
	token      Token
	acquiredAt time.Time // first grant of this offset; retries keep it
	retries    int       // Fail calls that scheduled a retry of this offset
}

// AcquireResult, SucceedResult and FailResult are built here, so that the
// Manager only looks up, locks and unlocks.

// acquire is TryAcquire under the domain lock.
func (s *domainState) acquire(domain string, offset int64, now time.Time) (AcquireResult, error) {
	// 1) Terminal checks.
	if s.processed.contains(offset) {
		return AcquireResult{Status: AlreadyProcessed}, nil
	}
	if s.failed.contains(offset) {
		return AcquireResult{Status: AlreadyFailed}, nil
	}
	// 2) Active lease exists.
	if s.leased {
		if offset == s.lease.offset {
			return s.lease.result(AlreadyAcquired), nil
		}
		s.backlog.pushBack(offset) // de-duplicates; terminal offsets were excluded above
		return AcquireResult{Status: Enqueued}, nil
	}
	// 3) No active lease: only the backlog's head may be granted.
	if head, ok := s.backlog.front(); ok {
		if head != offset {
			return AcquireResult{}, &BacklogOrderError{Domain: domain, Expected: head, Got: offset}
		}
		s.backlog.popFront()
	}
	s.issued.fence++
	s.leased = true
	s.lease = lease{offset: offset, token: s.issued, acquiredAt: now}
	return s.lease.result(Acquired), nil
}

// checkToken reports the error Succeed or Fail returns for tok, if any.
func (s *domainState) checkToken(tok Token) error {
	if !s.leased {
		return ErrNoLease
	}
	if tok != s.lease.token {
		return ErrTokenMismatch
	}
	return nil
}

// succeed is Succeed under the domain lock.
func (s *domainState) succeed(tok Token) (SucceedResult, error) {
	if err := s.checkToken(tok); err != nil {
		return SucceedResult{}, err
	}
	s.processed.add(s.lease.offset)
	s.release()
	if next, ok := s.backlog.front(); ok {
		return SucceedResult{Status: NextHint, Next: next}, nil
	}
	return SucceedResult{Status: NoBacklog}, nil
}

// fail is Fail under the domain lock.
func (s *domainState) fail(tok Token, maxRetries int) (FailResult, error) {
	if err := s.checkToken(tok); err != nil {
		return FailResult{}, err
	}
	if s.lease.retries < maxRetries {
		s.lease.retries++ // acquiredAt stays: it marks the offset's first grant
		return FailResult{Status: RetryScheduled, RetryCount: s.lease.retries}, nil
	}
	retries := s.lease.retries
	s.failed.add(s.lease.offset)
	s.release()
	if next, ok := s.backlog.front(); ok {
		return FailResult{Status: GiveUpNextHint, RetryCount: retries, Next: next}, nil
	}
	return FailResult{Status: GiveUpNoBacklog, RetryCount: retries}, nil
}

// release clears the lease.
func (s *domainState) release() {
	s.leased = false
	s.lease = lease{}
}

// result reports the lease as an AcquireResult with status st.
func (l *lease) result(st AcquireStatus) AcquireResult {
	return AcquireResult{Status: st, Token: l.token, AcquiredAt: l.acquiredAt, RetryCount: l.retries}
}
