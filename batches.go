package worklease

import (
	"fmt"
	"slices"
	"time"
)

// The calls that end many leases at once, SucceedMany, ClaimNext,
// RetryMany and ExtendMany: each passes through its claims' domains one at
// a time, each in a step of its own, and waits for the journal once for
// all of them (see batch), so that a worker pool ends a batch of jobs for
// the price of one call.

// SucceedMany is Succeed for each claim's lease, in the order of claims,
// and returns nil for each lease that succeeded and Succeed's error for
// each that did not. A domain with offsets queued becomes ready for Claim,
// behind the domains ready before it; SucceedMany hints at no next offset.
// It returns an error of its own, and no errors for the claims, if the
// Manager is closed, or if the journal failed (ErrJournalFailed): with a
// journal, it waits once for all the records it wrote.
func (m *Manager) SucceedMany(claims []Claim) ([]error, error) {
	_, errs, err := m.succeedMany(&callSucceedMany, claims, false, nil, nil)
	return errs, err
}

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
	return m.succeedMany(&callClaimNext, claims, true, nil, nil)
}

// succeedMany is SucceedMany, and ClaimNext if next is set; spec is the
// call's. It returns the leases granted in out[:0] and the claims' errors
// in errs[:0], each grown as needed, so that a caller that keeps them
// between calls makes its calls without allocating.
func (m *Manager) succeedMany(spec *callSpec, claims []Claim, next bool, out []Claim, errs []error) ([]Claim, []error, error) {
	if err := m.checkOpen(); err != nil {
		return nil, nil, err
	}
	if next {
		m.pullQueue()
	}
	errs = slices.Grow(errs[:0], len(claims))[:len(claims)]
	out = out[:0]
	var reads []payloadRead
	var b batch
	var named map[string]bool // the domains of the claims so far, in a batch too long to search
	for i := 0; i < len(claims) && b.err == nil; i++ {
		c := &claims[i]
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
		granted, pl, ok, err := m.succeedIn(&b, spec, c.Domain, c.Token, first, next)
		errs[i] = err
		if ok {
			if pl.seq != 0 {
				reads = append(reads, payloadRead{len(out), granted.Domain, granted.Offset, pl})
			}
			out = append(out, granted)
		} else if err == nil && !first && len(out) > 0 {
			// A later claim of a domain may end the lease its first
			// claim was just answered with (a ClaimNext repeated beside
			// that lease): the answer must not hand it out again.
			if j := slices.IndexFunc(out, func(g Claim) bool { return g.Domain == c.Domain && g.Token == c.Token }); j >= 0 {
				out = slices.Delete(out, j, j+1)
				reads = slices.DeleteFunc(reads, func(rd payloadRead) bool { return rd.i == j })
				for k := range reads {
					if reads[k].i > j {
						reads[k].i--
					}
				}
			}
		}
	}
	if err := m.endBatch(&b); err != nil {
		return nil, nil, err
	}
	if err := m.readPayloads(reads, func(i int) *[]byte { return &out[i].Payload }); err != nil {
		return nil, nil, err
	}
	return out, errs, nil
}

// succeedIn is Succeed of tok's lease on domain, in b, for the call spec. If the
// claim is its domain's first of the batch, a success ends the domain's
// streak, or, with next, carries it on with the claim of the domain's next
// offset, which it returns.
func (m *Manager) succeedIn(b *batch, spec *callSpec, domain string, tok Token, first, next bool) (Claim, payload, bool, error) {
	sh, r, now, err := m.enter(spec, domain, 0)
	if r == nil {
		return Claim{}, payload{}, false, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	var c Claim
	var pl payload
	granted := false
	switch {
	case !first:
		var res SucceedResult
		err = r.state.succeed(&m.policy, &st, tok, &res)
	case next:
		if granted, err = r.state.claimNext(&m.policy, &st, tok); granted {
			c, pl = m.claimOf(r)
		}
	default:
		err = r.state.succeedMany(&m.policy, &st, tok)
	}
	m.finish(sh, r, &st, b)
	return c, pl, granted, spec.wrap(domain, err) // c is zero and granted false when err is not nil
}

// RetryMany is Retry for each failure's lease, in the order of failures,
// and returns for each Retry's result and nil, or Retry's error; a domain
// named more than once is answered in that order, so that its later
// failures find the token spent. It returns an error of its own, and no
// results, if the Manager is closed, or if the journal failed
// (ErrJournalFailed): with a journal, it waits once for all the records
// it wrote.
func (m *Manager) RetryMany(failures []Failure) ([]RetryResult, []error, error) {
	if err := m.checkOpen(); err != nil {
		return nil, nil, err
	}
	results, errs := make([]RetryResult, len(failures)), make([]error, len(failures))
	var b batch
	for i := 0; i < len(failures) && b.err == nil; i++ {
		results[i], errs[i] = m.retryIn(&b, &callRetryMany, &failures[i])
	}
	if err := m.endBatch(&b); err != nil {
		return nil, nil, err
	}
	return results, errs, nil
}

// ExtendMany is Extend of each claim's lease by d, in the order of claims,
// and returns for each the lease's expiry and nil, or Extend's error: a
// worker pool renews the leases of all its running jobs with one call. It
// returns an error wrapping ErrInvalidDuration, and nothing for the
// claims, if d is not positive, and an error of its own if the Manager is
// closed or its journal failed; either way it changes nothing.
func (m *Manager) ExtendMany(claims []Claim, d time.Duration) ([]time.Time, []error, error) {
	if err := m.checkOpen(); err != nil {
		return nil, nil, err
	}
	if d <= 0 {
		return nil, nil, fmt.Errorf("worklease: ExtendMany: %w", ErrInvalidDuration)
	}
	expiries, errs := make([]time.Time, len(claims)), make([]error, len(claims))
	var b batch
	for i := 0; i < len(claims) && b.err == nil; i++ {
		expiries[i], errs[i] = m.extendIn(&b, &callExtendMany, claims[i].Domain, claims[i].Token, d)
	}
	if err := m.endBatch(&b); err != nil {
		return nil, nil, err
	}
	return expiries, errs, nil
}
