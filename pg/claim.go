package pg

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/worklease/worklease"
)

// The pull queue: a producer stores offsets with their payloads (Enqueue),
// and any worker of any process claims the heads of ready domains (Claim),
// each under a lease, and finishes it with Succeed, or with Retry to let
// another attempt wait out a delay without holding a worker. A domain's
// order, its single lease, its fences and its dead letters are the
// contract's, as with TryAcquire.

// ErrInvalidClaim is returned, wrapped, by Claim and WaitClaim for a count
// outside 1 to MaxClaim. It matches worklease.ErrInvalidClaim too.
var ErrInvalidClaim error = invalidClaim{}

// invalidClaim is ErrInvalidClaim: one sentence, as the in-memory Manager's
// ErrInvalidClaim is, that names the bounds.
type invalidClaim struct{}

func (invalidClaim) Error() string { return fmt.Sprintf("pg: claim count must be 1 to %d", MaxClaim) }

// Is reports whether target is worklease.ErrInvalidClaim, so that
// errors.Is works with either.
func (invalidClaim) Is(target error) bool { return target == worklease.ErrInvalidClaim }

// MaxClaim is the most leases one Claim grants: each locks a domain's row
// until the claim commits.
const MaxClaim = 10_000

// Claim leases the heads of up to n ready domains, in one transaction,
// and returns them (see worklease.Claim) with their payloads: domains that are idle, running,
// have offsets queued and whose retry delay, if any, is over, the highest
// priority first, then the longest waiting. A domain whose offset just
// finished waits behind those ready before it, so that a long backlog
// does not starve the others. A claim first takes over up to n domains
// whose lease is due (the expiry counts as a failed attempt, as Reap
// counts it), so that a crashed worker's domain comes back without a
// separate Reap. Domains another call holds at that moment are skipped.
// Claim returns no claims, and no error, when nothing is ready.
//
// A claim reads past the entries that the domains and offsets claimed
// before leave in the tables' indexes until vacuum removes them, which
// autovacuum does at most once a minute by default. So a Manager whose
// claims (and ClaimNext) have granted 2,000 leases since its last vacuum
// vacuums the two tables claims read, in the background, for a small
// share of the time at most and a minute at most each, on a connection of
// its own made as the pool makes one (see the package documentation),
// which it closes after; a role that does not own the tables leaves them
// to autovacuum. Close cancels a vacuum under way.
func (m *Manager) Claim(ctx context.Context, n int) ([]worklease.Claim, error) {
	claims, _, err := m.claim(ctx, n, false)
	return claims, err
}

// claim is Claim; with wantMore, it reports too whether more domains may
// be ready than it claimed.
func (m *Manager) claim(ctx context.Context, n int, wantMore bool) (claims []worklease.Claim, more bool, err error) {
	if m.closed.Load() {
		return nil, false, fmt.Errorf("pg: Claim: %w", worklease.ErrClosed)
	}
	if n < 1 || n > MaxClaim {
		op := "Claim"
		if wantMore { // only WaitClaim asks
			op = "WaitClaim"
		}
		return nil, false, fmt.Errorf("%w (%s of %d)", ErrInvalidClaim, op, n)
	}
	conn, err := m.conn(ctx, "Claim")
	if err != nil {
		return nil, false, err
	}
	defer conn.release()
	// A claim that found ready domains but took none, as other calls had
	// changed them since its snapshot, looks again at once.
	// A claim that put off domains whose head is scheduled for later
	// claims again for the rest, as those are no longer ready.
	for tries := 1; ; tries++ {
		fast, err := retryDeadlocked(func() (fastClaim, error) { return m.claimFast(ctx, conn, n-len(claims), wantMore) })
		switch {
		case err != nil:
			return claims, false, err
		case fast.due: // the claim function takes due leases over first
			due, err := retryDeadlocked(func() ([]worklease.Claim, error) { return m.claimDue(ctx, conn, n-len(claims)) })
			m.noteGrants(len(due))
			claims = append(claims, due...)
			return claims, len(claims) == n, err
		case fast.postponed > 0 && len(claims)+len(fast.claims) < n:
			m.noteGrants(len(fast.claims))
			claims = append(claims, fast.claims...)
		case len(fast.claims) > 0 || fast.skipped == 0 || tries == 3:
			m.noteGrants(len(fast.claims))
			return append(claims, fast.claims...), fast.more || fast.skipped > 0, nil
		}
	}
}

// claimDue is Claim when a lease is due: the schema's claim function takes
// due leases over, then claims.
func (m *Manager) claimDue(ctx context.Context, conn *callConn, n int) ([]worklease.Claim, error) {
	rows, err := conn.Query(ctx, m.sql.claim, append([]any{n, m.now()}, m.policy()...)...)
	if err != nil {
		return nil, conn.fail("Claim", err)
	}
	defer rows.Close()
	type claimed struct {
		domain  string
		off     *int64
		payload []byte
		a       answer
	}
	var all []claimed
	for rows.Next() {
		var c claimed
		var d []byte
		if err := rows.Scan(append([]any{&d, &c.off, &c.payload}, c.a.dest()...)...); err != nil {
			return nil, conn.fail("Claim", err)
		}
		c.domain = string(d)
		all = append(all, c)
	}
	if err := rows.Err(); err != nil {
		return nil, conn.fail("Claim", err)
	}
	var out []worklease.Claim
	for i := range all {
		c := &all[i]
		m.report(c.domain, &c.a, nil, worklease.Token{}, nil)
		if c.off == nil { // a takeover's expiry, with no grant
			continue
		}
		l := m.lease(c.domain, &c.a)
		out = append(out, worklease.Claim{
			Domain: c.domain, Offset: *c.off, Payload: c.payload, Token: l.Token,
			Attempt: int(c.a.attempts), ExpiresAt: l.ExpiresAt,
		})
	}
	return out, nil
}

// Retry ends tok's lease on domain as a failed attempt without holding a
// worker while the offset waits: if it has retries left (see
// worklease.WithMaxRetries) the offset goes back to the front of its
// domain's line, and the domain becomes ready for Claim once delay has
// passed, for any worker; in FIFO order nothing of the domain overtakes
// it (with LIFO ordering a later offset goes in front, as always; Pause
// and Resume end the delay, and so do Kill of the offset and Redrive of
// another, which put another offset at the head). Otherwise the offset becomes a dead letter
// with cause, as Fail would make it. The token is spent either way.
// Errors are those of Fail.
func (m *Manager) Retry(ctx context.Context, domain string, tok worklease.Token, cause error, delay time.Duration) (worklease.RetryResult, error) {
	if err := m.check("Retry", domain, 0); err != nil {
		return worklease.RetryResult{}, err
	}
	if delay < 0 {
		return worklease.RetryResult{}, domainError("Retry", domain, fmt.Errorf("%w: %v", worklease.ErrInvalidDuration, delay))
	}
	cause = keepCause(cause)
	a, err := m.call(ctx, "Retry", m.sql.retry, append(m.holderArgs(domain, tok), causeText(cause), delay)...)
	if err != nil {
		return worklease.RetryResult{}, err
	}
	if err := m.refused("Retry", domain, &a, cause, tok); err != nil {
		return worklease.RetryResult{}, err
	}
	return worklease.RetryResult{DeadLettered: a.status == 2, RetryCount: int(a.retryCount)}, nil
}

// SucceedMany is Succeed for each claim's lease, in one round trip and one
// transaction for those it can end at once: each lease not due whose token
// is its domain's. The others, and any claim of a domain given twice, are
// each answered by Succeed. It returns nil for each lease that succeeded,
// and Succeed's error for each that did not, in the order of claims. A
// domain with offsets queued becomes ready for Claim, behind the domains
// ready before it: SucceedMany reads no backlog and hints at no next
// offset. It returns an error of its own, and no errors for the claims,
// if the batch failed as a whole.
func (m *Manager) SucceedMany(ctx context.Context, claims []worklease.Claim) ([]error, error) {
	_, errs, err := m.succeedMany(ctx, "SucceedMany", claims, false)
	return errs, err
}

// succeedMany is SucceedMany, and ClaimNext if next is set.
func (m *Manager) succeedMany(ctx context.Context, op string, claims []worklease.Claim, next bool) ([]worklease.Claim, []error, error) {
	if m.closed.Load() {
		return nil, nil, fmt.Errorf("pg: %s: %w", op, worklease.ErrClosed)
	}
	errs := make([]error, len(claims))
	domains, fences, serials := make([][]byte, 0, len(claims)), make([]int64, 0, len(claims)), make([]int64, 0, len(claims))
	pending := make(map[string]int, len(claims)) // the claim of each domain in the batch, by index
	named := make(map[string]bool, len(claims))  // the domains of the claims so far
	var rest []int                               // claims left for Succeed
	for i, c := range claims {
		if err := m.check(op, c.Domain, 0); err != nil {
			errs[i] = err
			continue
		}
		// A domain's first claim goes in the batch, unless its token is
		// another database's; a domain's later claims are each answered
		// after it, by Succeed, in order.
		first := !named[c.Domain]
		named[c.Domain] = true
		if !first || c.Token.Instance() != m.instance {
			rest = append(rest, i)
			continue
		}
		pending[c.Domain] = i
		domains = append(domains, []byte(c.Domain))
		fences, serials = append(fences, int64(c.Token.Fence())), append(serials, int64(c.Token.Serial()))
	}
	var granted []grantedNext
	if len(domains) > 0 {
		all, err := retryDeadlocked(func() ([]ended, error) { return m.endBatch(ctx, op, domains, fences, serials, next) })
		if err != nil {
			return nil, nil, err
		}
		for _, e := range all {
			i := pending[string(e.domain)]
			delete(pending, string(e.domain))
			if m.cfg.Observer != nil {
				a := answer{serial: int64(claims[i].Token.Serial()), at: &e.at}
				a.event(worklease.EventProcessed, e.off, e.attempts, e.fence)
				m.report(claims[i].Domain, &a, nil, worklease.Token{}, nil)
			}
			if e.next != nil {
				e.next.Domain = claims[i].Domain
				granted = append(granted, grantedNext{i, *e.next})
				if m.cfg.Observer != nil {
					a := answer{serial: int64(e.next.Token.Serial()), at: &e.at}
					a.event(worklease.EventAcquired, e.next.Offset, int32(e.next.Attempt), int64(e.next.Token.Fence()))
					m.report(claims[i].Domain, &a, nil, worklease.Token{}, nil)
				}
			}
		}
		for _, i := range pending { // not ended at once
			rest = append(rest, i)
		}
	}
	slices.Sort(rest)
	for _, i := range rest {
		c := &claims[i]
		if j, ok := pending[c.Domain]; next && ok && j == i { // perhaps a ClaimNext repeated
			repeated, ok, err := m.repeatedNext(ctx, c.Domain, c.Token)
			if err != nil {
				errs[i] = err
				continue
			}
			if ok {
				granted = append(granted, grantedNext{i, repeated})
				continue
			}
		}
		_, errs[i] = m.Succeed(ctx, c.Domain, c.Token)
		if errs[i] == nil && next {
			// A later claim of a domain may end the lease its first claim
			// was just answered with (a ClaimNext repeated beside that
			// lease): the answer must not hand it out again.
			granted = slices.DeleteFunc(granted, func(g grantedNext) bool {
				return g.c.Domain == c.Domain && g.c.Token == c.Token
			})
		}
	}
	m.noteGrants(len(granted))
	if len(granted) == 0 {
		return nil, errs, nil
	}
	slices.SortFunc(granted, func(a, b grantedNext) int { return a.i - b.i })
	out := make([]worklease.Claim, len(granted))
	for j, g := range granted {
		out[j] = g.c
	}
	return out, errs, nil
}

// A grantedNext is a lease ClaimNext granted, after the i-th claim's.
type grantedNext struct {
	i int
	c worklease.Claim
}

// MaxStreak is how many leases in a row ClaimNext grants a domain since it
// was last claimed; the next time, the domain goes behind the other ready
// domains instead, so that a worker that keeps going through one deep
// backlog does not starve the others. It is the in-memory Manager's.
const MaxStreak = worklease.MaxStreak

// ClaimNext is SucceedMany, and in the same round trip it claims for the
// caller the next offset of each domain it ends at once, as Claim would:
// the head of its backlog, with its payload, under a new lease. A domain
// whose next offset it does not lease, because it has none queued, is
// paused, or was leased MaxStreak times in a row by ClaimNext, becomes
// ready for Claim as SucceedMany leaves it. It returns the leases it
// granted, in the order of claims, and for each claim nil or Succeed's
// error, as SucceedMany does; a lease that SucceedMany would end through
// Succeed is ended so, without a next lease.
//
// ClaimNext may be repeated, as after ErrOutcomeUnknown: a claim whose
// lease it ended already, with the next lease granted to its caller, is
// answered with that lease again, and nil for an error, for as long as
// that lease is in flight; nothing changes. A lease the call granted, or
// answered with again, that a later claim of the same call ends is not
// among the leases returned. Once it ended or expired, the
// repeated claim gets Succeed's error for a spent token.
func (m *Manager) ClaimNext(ctx context.Context, claims []worklease.Claim) ([]worklease.Claim, []error, error) {
	return m.succeedMany(ctx, "ClaimNext", claims, true)
}

// SetPriority sets domain's priority for Claim, which takes ready domains
// of a higher priority first, and of equal priority the longest waiting
// first. Domains start at 0; a priority may be negative. An unknown domain
// is created with it, so that its priority holds from its first offset on.
func (m *Manager) SetPriority(ctx context.Context, domain string, priority int32) error {
	_, err := m.admin(ctx, "SetPriority", domain, 0, nil, m.sql.setPriority, []byte(domain), priority)
	return err
}
