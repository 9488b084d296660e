package pg

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/worklease/worklease"
)

var _ worklease.Backend = (*Manager)(nil)

// TryAcquire is worklease.Manager.TryAcquire.
func (m *Manager) TryAcquire(ctx context.Context, domain string, offset int64) (worklease.AcquireResult, error) {
	if err := m.check("TryAcquire", domain, offset); err != nil {
		return worklease.AcquireResult{}, err
	}
	a, ok, err := m.tryAcquireFast(ctx, domain, offset)
	if err == nil && !ok {
		a, err = m.call(ctx, "TryAcquire", m.sql.tryAcquire, []byte(domain), offset)
	}
	if err != nil {
		return worklease.AcquireResult{}, err
	}
	m.report(domain, &a, nil, worklease.Token{}, nil)
	if a.err == 5 {
		return worklease.AcquireResult{}, &worklease.BacklogOrderError{Domain: domain, Expected: *a.head, Got: offset}
	}
	res := worklease.AcquireResult{Status: worklease.AcquireStatus(a.status)}
	if res.Status == worklease.Acquired || res.Status == worklease.AlreadyAcquired {
		l := m.lease(domain, &a)
		res.Token, res.AcquiredAt, res.ExpiresAt, res.RetryCount = l.Token, l.AcquiredAt, l.ExpiresAt, l.RetryCount
	}
	return res, nil
}

// holderArgs returns the arguments that identify a holder's token.
func (m *Manager) holderArgs(domain string, tok worklease.Token) []any {
	return []any{[]byte(domain), int64(tok.Fence()), int64(tok.Serial()), tok.Instance() == m.instance}
}

// Succeed is worklease.Manager.Succeed.
func (m *Manager) Succeed(ctx context.Context, domain string, tok worklease.Token) (worklease.SucceedResult, error) {
	return m.succeed(ctx, "Succeed", domain, tok, false)
}

// SucceedNext is worklease.Manager.SucceedNext.
func (m *Manager) SucceedNext(ctx context.Context, domain string, tok worklease.Token) (worklease.SucceedResult, error) {
	return m.succeed(ctx, "SucceedNext", domain, tok, true)
}

func (m *Manager) succeed(ctx context.Context, op, domain string, tok worklease.Token, next bool) (worklease.SucceedResult, error) {
	if err := m.check(op, domain, 0); err != nil {
		return worklease.SucceedResult{}, err
	}
	holder := m.holderArgs(domain, tok)
	a, ok, err := m.succeedFast(ctx, op, holder)
	if err == nil && !ok {
		a, err = m.call(ctx, op, m.sql.succeed, append(holder, next)...)
	}
	if err != nil {
		return worklease.SucceedResult{}, err
	}
	if err := m.refused(op, domain, &a, nil, tok); err != nil {
		return worklease.SucceedResult{}, err
	}
	res := worklease.SucceedResult{Status: worklease.SucceedStatus(a.status)}
	switch res.Status {
	case worklease.NextHint:
		res.Next = *a.hint
	case worklease.NextAcquired:
		res.Lease = m.lease(domain, &a)
	}
	return res, nil
}

// refused reports the call's events and returns its error, if it has one.
func (m *Manager) refused(op, domain string, a *answer, cause error, tok worklease.Token) error {
	var err error
	if a.err != 0 {
		err = errorOf(a.err)
	}
	if !a.absent() { // an unknown domain is no event
		m.report(domain, a, cause, tok, err)
	}
	if err != nil {
		return domainError(op, domain, err)
	}
	return nil
}

// Fail is worklease.Manager.Fail.
func (m *Manager) Fail(ctx context.Context, domain string, tok worklease.Token, cause error) (worklease.FailResult, error) {
	return m.fail(ctx, "Fail", domain, tok, cause, false)
}

// FailNext is worklease.Manager.FailNext.
func (m *Manager) FailNext(ctx context.Context, domain string, tok worklease.Token, cause error) (worklease.FailResult, error) {
	return m.fail(ctx, "FailNext", domain, tok, cause, true)
}

func (m *Manager) fail(ctx context.Context, op, domain string, tok worklease.Token, cause error, next bool) (worklease.FailResult, error) {
	if err := m.check(op, domain, 0); err != nil {
		return worklease.FailResult{}, err
	}
	cause = keepCause(cause)
	a, err := m.call(ctx, op, m.sql.fail, append(m.holderArgs(domain, tok), causeText(cause), next)...)
	if err != nil {
		return worklease.FailResult{}, err
	}
	if err := m.refused(op, domain, &a, cause, tok); err != nil {
		return worklease.FailResult{}, err
	}
	res := worklease.FailResult{Status: worklease.FailStatus(a.status), RetryCount: int(a.retryCount)}
	switch res.Status {
	case worklease.GiveUpNextHint:
		res.Next = *a.hint
	case worklease.GiveUpNextAcquired:
		res.Lease = m.lease(domain, &a)
	}
	return res, nil
}

// Extend is worklease.Manager.Extend.
func (m *Manager) Extend(ctx context.Context, domain string, tok worklease.Token, d time.Duration) (time.Time, error) {
	if err := m.check("Extend", domain, 0); err != nil {
		return time.Time{}, err
	}
	if d <= 0 {
		return time.Time{}, domainError("Extend", domain, fmt.Errorf("%w: %v", worklease.ErrInvalidDuration, d))
	}
	micros := max(d.Microseconds(), 1)
	a, err := m.call(ctx, "Extend", m.sql.extend, append(m.holderArgs(domain, tok), time.Duration(micros)*time.Microsecond)...)
	if err != nil {
		return time.Time{}, err
	}
	if err := m.refused("Extend", domain, &a, nil, tok); err != nil {
		return time.Time{}, err
	}
	return timeOf(a.expireAt), nil
}

// Inspect is worklease.Manager.Inspect. On a read-only server (see
// ErrReadOnly), it reads the domain as that server has it, without locking
// it: a lease that is due stays in the answer, with its ExpiresAt past,
// rather than being taken over.
func (m *Manager) Inspect(ctx context.Context, domain string) (worklease.DomainInfo, error) {
	if err := m.check("Inspect", domain, 0); err != nil {
		return worklease.DomainInfo{}, err
	}
	var backlog []int64
	var info worklease.DomainInfo
	var a answer
	dest := append([]any{&backlog, &info.Processed, &info.Failed}, a.dest()...)
	args := append([]any{[]byte(domain), m.now()}, m.policy()...)
	c, err := m.conn(ctx, "Inspect")
	if err != nil {
		return worklease.DomainInfo{}, err
	}
	defer c.release()
	if err := c.QueryRow(ctx, m.sql.inspect, args...).Scan(dest...); err != nil {
		if err = c.fail("Inspect", err); errors.Is(err, ErrReadOnly) {
			return m.inspectRead(ctx, c, domain)
		}
		return worklease.DomainInfo{}, err
	}
	if a.absent() {
		return worklease.DomainInfo{}, nil
	}
	m.report(domain, &a, nil, worklease.Token{}, nil)
	info.Leased, info.Lease, info.Paused = a.leaseOff != nil, m.lease(domain, &a), a.paused
	if len(backlog) > 0 {
		info.Backlog = backlog
	}
	return info, nil
}

// inspectRead is Inspect on c, a connection to a read-only server, which
// took no lock: it reads the domain as the server has it, without ending
// a lease that is due (its ExpiresAt is then past), as no server that
// takes no writes can.
func (m *Manager) inspectRead(ctx context.Context, c *callConn, domain string) (worklease.DomainInfo, error) {
	var info worklease.DomainInfo
	var backlog []int64
	var leaseOff *int64
	var fence, serial int64
	var retries int32
	var acquired, expires *time.Time
	err := c.QueryRow(ctx, m.sql.inspectRead, []byte(domain), m.cfg.MonotonicOffsets).Scan(&backlog, &info.Processed, &info.Failed,
		&leaseOff, &fence, &serial, &retries, &acquired, &expires, &info.Paused)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return worklease.DomainInfo{}, nil
	case err != nil:
		return worklease.DomainInfo{}, dbError("Inspect", err)
	}
	if len(backlog) > 0 {
		info.Backlog = backlog
	}
	if leaseOff != nil {
		info.Leased = true
		info.Lease = worklease.LeaseInfo{Domain: domain, Offset: *leaseOff, Token: m.token(fence, serial),
			AcquiredAt: timeOf(acquired), ExpiresAt: timeOf(expires), RetryCount: int(retries)}
	}
	return info, nil
}

// Leases is worklease.Manager.Leases.
func (m *Manager) Leases(ctx context.Context) ([]worklease.LeaseInfo, error) {
	if m.closed.Load() {
		return nil, fmt.Errorf("pg: Leases: %w", worklease.ErrClosed)
	}
	rows, err := m.pool.Query(ctx, m.sql.leases)
	if err != nil {
		return nil, dbError("Leases", err)
	}
	defer rows.Close()
	var out []worklease.LeaseInfo
	for rows.Next() {
		var domain []byte
		var l worklease.LeaseInfo
		var fence, serial int64
		var retries int32
		var acquired, expires *time.Time
		if err := rows.Scan(&domain, &l.Offset, &fence, &serial, &retries, &acquired, &expires); err != nil {
			return nil, dbError("Leases", err)
		}
		l.Domain, l.Token, l.RetryCount = string(domain), m.token(fence, serial), int(retries)
		l.AcquiredAt, l.ExpiresAt = timeOf(acquired), timeOf(expires)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("Leases", err)
	}
	return out, nil
}

// Domains is worklease.Manager.Domains.
func (m *Manager) Domains(ctx context.Context) ([]string, error) {
	if m.closed.Load() {
		return nil, fmt.Errorf("pg: Domains: %w", worklease.ErrClosed)
	}
	rows, err := m.pool.Query(ctx, m.sql.domains)
	if err != nil {
		return nil, dbError("Domains", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d []byte
		if err := rows.Scan(&d); err != nil {
			return nil, dbError("Domains", err)
		}
		out = append(out, string(d))
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("Domains", err)
	}
	return out, nil
}

// DeadLetters is worklease.Manager.DeadLetters.
func (m *Manager) DeadLetters(ctx context.Context, domain string) ([]worklease.DeadLetter, error) {
	if m.closed.Load() {
		return nil, fmt.Errorf("pg: DeadLetters: %w", worklease.ErrClosed)
	}
	statement, args := m.sql.deadLetters, []any(nil)
	if domain != "" {
		if err := m.check("DeadLetters", domain, 0); err != nil {
			return nil, err
		}
		statement, args = m.sql.deadLettersOf, []any{[]byte(domain)}
	}
	rows, err := m.pool.Query(ctx, statement, args...)
	if err != nil {
		return nil, dbError("DeadLetters", err)
	}
	defer rows.Close()
	var out []worklease.DeadLetter
	for rows.Next() {
		var d, cause []byte
		var why int16
		var attempts int32
		var dl worklease.DeadLetter
		if err := rows.Scan(&d, &dl.Offset, &why, &cause, &attempts, &dl.At); err != nil {
			return nil, dbError("DeadLetters", err)
		}
		dl.Domain, dl.Attempts = string(d), int(attempts)
		switch {
		case why == 1:
			dl.Cause = worklease.ErrLeaseExpired
		case len(cause) > 0:
			dl.Cause = errors.New(string(cause))
		}
		out = append(out, dl)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("DeadLetters", err)
	}
	return out, nil
}

// Kill is worklease.Manager.Kill.
func (m *Manager) Kill(ctx context.Context, domain string, offset int64, reason string) (worklease.Head, error) {
	if err := m.check("Kill", domain, offset); err != nil {
		return worklease.Head{}, err
	}
	reason = truncate(reason, worklease.MaxCauseLen)
	var cause error
	var text any // NULL: no cause
	if reason != "" {
		cause, text = errors.New(reason), []byte(reason)
	}
	// With monotonic offsets, a domain the database does not know has no
	// offset Kill may fail.
	create := !m.cfg.MonotonicOffsets
	a, err := m.call(ctx, "Kill", m.sql.kill, []byte(domain), offset, text, create)
	if err != nil {
		return worklease.Head{}, err
	}
	if a.absent() {
		return worklease.Head{}, domainError("Kill", domain, worklease.ErrOffsetAhead)
	}
	if err := m.refused("Kill", domain, &a, cause, worklease.Token{}); err != nil {
		return worklease.Head{}, err
	}
	return headOf(&a), nil
}

// Redrive is worklease.Manager.Redrive.
func (m *Manager) Redrive(ctx context.Context, domain string, offset int64) (worklease.Head, error) {
	return m.admin(ctx, "Redrive", domain, offset, worklease.ErrNotDeadLettered, m.sql.redrive, []byte(domain), offset)
}

// ForceRelease is worklease.Manager.ForceRelease.
func (m *Manager) ForceRelease(ctx context.Context, domain string) (worklease.Head, error) {
	return m.admin(ctx, "ForceRelease", domain, 0, worklease.ErrNoLease, m.sql.forceRelease, []byte(domain))
}

// Pause is worklease.Manager.Pause.
func (m *Manager) Pause(ctx context.Context, domain string) error {
	_, err := m.admin(ctx, "Pause", domain, 0, nil, m.sql.setPaused, []byte(domain), true)
	return err
}

// Resume is worklease.Manager.Resume.
func (m *Manager) Resume(ctx context.Context, domain string) (worklease.Head, error) {
	return m.admin(ctx, "Resume", domain, 0, nil, m.sql.setPaused, []byte(domain), false)
}

// Forget is worklease.Manager.Forget.
func (m *Manager) Forget(ctx context.Context, domain string) error {
	_, err := m.admin(ctx, "Forget", domain, 0, nil, m.sql.forget, []byte(domain))
	return err
}

// admin makes an admin call; unknown is its error for a domain the
// database does not know, nil for none.
func (m *Manager) admin(ctx context.Context, op, domain string, offset int64, unknown error, statement string, args ...any) (worklease.Head, error) {
	if err := m.check(op, domain, offset); err != nil {
		return worklease.Head{}, err
	}
	a, err := m.call(ctx, op, statement, args...)
	if err != nil {
		return worklease.Head{}, err
	}
	if a.absent() {
		if unknown != nil {
			return worklease.Head{}, domainError(op, domain, unknown)
		}
		return worklease.Head{}, nil
	}
	if err := m.refused(op, domain, &a, nil, worklease.Token{}); err != nil {
		return worklease.Head{}, err
	}
	return headOf(&a), nil
}

// Reap is worklease.Manager.Reap, in transactions of up to 100 leases
// each, so that it never holds many domains at once: it revokes every
// lease due, except on a domain another call holds at that moment, which
// that call expires itself if the lease is still due. If a transaction
// fails, Reap returns its error with the expiries of those before it,
// which committed.
func (m *Manager) Reap(ctx context.Context) ([]worklease.Expiry, error) {
	if m.closed.Load() {
		return nil, fmt.Errorf("pg: Reap: %w", worklease.ErrClosed)
	}
	var out []worklease.Expiry
	for {
		batch, err := m.reap(ctx)
		out = append(out, batch...)
		if err != nil {
			return out, err
		}
		if len(batch) < reapBatch {
			return out, nil
		}
	}
}

// reapBatch is how many leases a transaction of Reap expires at most: the
// locks of the domains it expires are held until it commits.
const reapBatch = 100

// reap expires up to reapBatch leases due, in one transaction, and reports
// their events once it has committed.
func (m *Manager) reap(ctx context.Context) ([]worklease.Expiry, error) {
	c, err := m.conn(ctx, "Reap")
	if err != nil {
		return nil, err
	}
	defer c.release()
	rows, err := c.Query(ctx, m.sql.reap, append([]any{reapBatch, m.now()}, m.policy()...)...)
	if err != nil {
		return nil, c.fail("Reap", err)
	}
	defer rows.Close()
	type reaped struct {
		exp worklease.Expiry
		a   answer
	}
	var all []reaped
	for rows.Next() {
		var r reaped
		var d []byte
		var fence, serial int64
		var attempts int32
		dest := append([]any{&d, &r.exp.Offset, &fence, &serial, &attempts, &r.exp.DeadLettered}, r.a.dest()...)
		if err := rows.Scan(dest...); err != nil {
			return nil, c.fail("Reap", err)
		}
		r.exp.Domain, r.exp.Token, r.exp.Attempts = string(d), m.token(fence, serial), int(attempts)
		r.exp.Head = headOf(&r.a)
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail("Reap", err)
	}
	out := make([]worklease.Expiry, 0, len(all))
	for i := range all {
		m.report(all[i].exp.Domain, &all[i].a, nil, worklease.Token{}, nil)
		out = append(out, all[i].exp)
	}
	return out, nil
}

// Stats returns the counts of every transition of every process on the
// database's domains, those forgotten included.
func (m *Manager) Stats(ctx context.Context) (worklease.Stats, error) {
	if m.closed.Load() {
		return worklease.Stats{}, fmt.Errorf("pg: Stats: %w", worklease.ErrClosed)
	}
	var forgotten, live []int64
	if err := m.pool.QueryRow(ctx, m.sql.stats).Scan(&forgotten, &live); err != nil {
		return worklease.Stats{}, dbError("Stats", err)
	}
	n := func(k worklease.EventKind) uint64 {
		var sum int64
		if int(k) <= len(forgotten) {
			sum += forgotten[k-1]
		}
		if int(k) <= len(live) {
			sum += live[k-1]
		}
		return uint64(sum)
	}
	return worklease.Stats{
		Acquired: n(worklease.EventAcquired), Enqueued: n(worklease.EventEnqueued), Processed: n(worklease.EventProcessed),
		Retried: n(worklease.EventRetrying), DeadLettered: n(worklease.EventDeadLettered), Expired: n(worklease.EventExpired),
		Requeued: n(worklease.EventRequeued), Extended: n(worklease.EventExtended), Rejected: n(worklease.EventRejected),
		OutOfOrder: n(worklease.EventOutOfOrder), Killed: n(worklease.EventKilled), Redriven: n(worklease.EventRedriven),
		Released: n(worklease.EventReleased), Paused: n(worklease.EventPaused), Resumed: n(worklease.EventResumed),
		Forgotten: n(worklease.EventForgotten), Cancelled: n(worklease.EventCancelled),
	}, nil
}

// A failure's cause as a dead letter keeps it: its text cut to
// worklease.MaxCauseLen, unwrapping to the caller's error.
type cutCause struct {
	err  error
	text string
}

func (c *cutCause) Error() string { return c.text }
func (c *cutCause) Unwrap() error { return c.err }

// keepCause returns the cause Fail keeps for err: err itself if its text
// fits, else err with its text cut.
func keepCause(err error) error {
	if err == nil {
		return nil
	}
	if text := err.Error(); len(text) > worklease.MaxCauseLen {
		return &cutCause{err: err, text: truncate(text, worklease.MaxCauseLen)}
	}
	return err
}

// causeText returns the text a dead letter keeps of cause: NULL for none
// or an empty text.
func causeText(cause error) any {
	if cause == nil || cause.Error() == "" {
		return nil
	}
	return []byte(cause.Error())
}

// truncate cuts s to at most n bytes, at a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
