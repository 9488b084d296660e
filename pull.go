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

// A Failure is a failed attempt for RetryMany to end: the lease of Claim
// (its Domain and Token; the other fields are not read), the attempt's
// Cause, and the Delay before the offset's next attempt, as Retry takes
// them.
type Failure struct {
	Claim
	Cause error
	Delay time.Duration
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
// journaled, as are schedules (see EnqueueAt): after a restart the offset
// is ready once they end.
//
// Claim returns an error wrapping ErrInvalidClaim for n below 1, and
// ErrClosed once the Manager is closed; either way it changes nothing.
func (m *Manager) Claim(n int) ([]Claim, error) {
	if err := m.checkClaim("Claim", n); err != nil {
		return nil, err
	}
	return m.claim(n, nil)
}

// claim is Claim, once n is checked, returning its claims in out[:0],
// grown as needed.
func (m *Manager) claim(n int, out []Claim) ([]Claim, error) {
	q := m.pullQueue()
	now := m.now()
	var b batch
	if m.expiring {
		m.takeOver(now, n, &b)
	}
	out = out[:0]
	var reads []payloadRead
	for len(out) < n && b.err == nil {
		e, ok := q.pop(now)
		if !ok {
			break
		}
		if c, pl, ok := m.claimEntry(q, &e, now, &b); ok {
			if pl.seq != 0 {
				reads = append(reads, payloadRead{len(out), c.Domain, c.Offset, pl})
			}
			out = append(out, c)
		}
	}
	if err := m.endBatch(&b); err != nil {
		return nil, err
	}
	if err := m.readPayloads(reads, func(i int) *[]byte { return &out[i].Payload }); err != nil {
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
// returned, is still the domain's entry. A payload the journal holds is
// returned apart, for the caller to read once the batch has ended (see
// claimOf).
func (m *Manager) claimEntry(q *readyQueue, e *readyEntry, now instant, b *batch) (Claim, payload, bool) {
	r := e.r
	r.mu.Lock()
	if !q.current(e) {
		// The domain stopped being ready after it was listed: a grant took
		// its head, say. If it is ready again, its new entry is behind.
		r.mu.Unlock()
		return Claim{}, payload{}, false
	}
	st := step{now: now, kept: m.stepBuffer()}
	var c Claim
	var pl payload
	granted := r.state.claim(&m.policy, &st)
	if granted {
		c, pl = m.claimOf(r)
	} else {
		q.putBack(r, now) // the entry was taken, and the domain is still listed
	}
	m.finish(m.shardOf(m.hash(r.domain)), r, &st, b) // a domain granted leaves the queue
	return c, pl, granted
}

// claimOf returns the Claim of r's lease, with a copy of its payload if it
// is in memory; if the journal holds it, it returns where, and the caller
// reads it once it released the lock and the journal holds the records
// the claim depends on (see readPayload). r.mu must be held, and r leased.
func (m *Manager) claimOf(r *domainRecord) (Claim, payload) {
	s := &r.state
	c := Claim{
		Domain: r.domain, Offset: s.lease.offset,
		Token: s.leaseToken(&m.policy), Attempt: s.attempts(), ExpiresAt: s.lease.expiresAt.in(m.loc),
	}
	pl, _ := s.payloadOf(s.lease.offset)
	if pl.seq == 0 {
		c.Payload = bytes.Clone(pl.data)
		return c, payload{}
	}
	return c, pl
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
		m.reapOne(d.sh, d.e.r, now, b)
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
	return m.waitClaim(ctx, n, poll, nil)
}

// waitClaim is WaitClaim, returning its claims in out[:0], grown as
// needed.
func (m *Manager) waitClaim(ctx context.Context, n int, poll time.Duration, out []Claim) ([]Claim, error) {
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
		if err := m.checkOpen(); err != nil {
			return nil, err
		}
		claims, err := m.claim(n, out)
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
// schedules a retry followed by a requeue, which holds the delay's end, so
// that the delay outlives a restart.
func (m *Manager) Retry(domain string, tok Token, cause error, delay time.Duration) (RetryResult, error) {
	var b batch
	res, err := m.retryIn(&b, &callRetry, &Failure{Claim: Claim{Domain: domain, Token: tok}, Cause: cause, Delay: delay})
	if berr := m.endBatch(&b); berr != nil {
		return RetryResult{}, berr
	}
	return res, err
}

// retryIn is Retry of f's lease, in b, for c.
func (m *Manager) retryIn(b *batch, c *callSpec, f *Failure) (RetryResult, error) {
	cause := f.Cause
	sh, r, now, err := m.enterWith(c, f.Domain, 0, f.Delay < 0, &cause)
	if r == nil {
		return RetryResult{}, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	res, err := r.state.retry(&m.policy, &st, f.Token, cause, f.Delay)
	m.finish(sh, r, &st, b)           // lists the domain, ready once the delay ends
	return res, c.wrap(f.Domain, err) // res is zero when err is not nil
}
