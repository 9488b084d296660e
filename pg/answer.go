package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
)

// statements are the calls' statements, each a call of the schema's
// function of the same name with the Manager's policy last.
type statements struct {
	tryAcquire, succeed, fail, extend, kill, redrive, forceRelease, setPaused, forget string
	inspect, inspectRead, reap, leases, domains, deadLetters, deadLettersOf, stats    string
	enqueue, enqueueMany, enqueueManyStatuses, claim, retry, setPriority              string
	retryMany, extendMany                                                             string
	enqueueAt, append, cancel                                                         string
}

// answerColumns are the columns of an answer, in the order answer.dest
// scans them.
const answerColumns = "status, err, hint, retry_count, head, lease_off, fence, serial, attempts, retries, " +
	"acquired_at, expires_at, paused, ev_kinds, ev_offs, ev_attempts, ev_fences, ev_whys, at"

// policyRow returns the SQL of the policy made of the six arguments from
// $first on (see Manager.policy).
func policyRow(schema string, first int) string {
	p := first
	return fmt.Sprintf("ROW($%d::int, CASE WHEN $%d::bigint = 0 THEN NULL ELSE $%d::bigint * interval '1 microsecond' END, $%d::bool, $%d::bool, $%d::bool, $%d::bool)::%s.policy",
		p, p+1, p+1, p+2, p+3, p+4, p+5, schema)
}

func newStatements(schema string) statements {
	// call returns the statement of function fn with n arguments before
	// the time and the policy.
	call := func(fn string, n int) string {
		args := ""
		for i := 1; i <= n; i++ {
			args += fmt.Sprintf("$%d, ", i)
		}
		return fmt.Sprintf("SELECT %s FROM %s.%s(%s$%d, %s)", answerColumns, schema, fn, args, n+1, policyRow(schema, n+2))
	}
	enqueueManyCall := fmt.Sprintf("%s.enqueue_many($1, $2, $3, $4, %s) e", schema, policyRow(schema, 5))
	return statements{
		tryAcquire:   call("try_acquire", 2),
		succeed:      call("succeed", 5),
		fail:         call("fail", 6),
		extend:       call("extend", 5),
		kill:         call("kill", 4),
		redrive:      call("redrive", 2),
		forceRelease: call("force_release", 1),
		setPaused:    call("set_paused", 2),
		forget:       call("forget", 1),
		enqueue:      call("enqueue", 3),
		enqueueAt:    call("enqueue_at", 4),
		append:       call("append", 5),
		cancel:       call("cancel", 3),
		enqueueMany:  "SELECT e.i, (e.a).* FROM " + enqueueManyCall,
		// EnqueueMany's statement for a caller that reports no events: the
		// statuses alone, without the answers' other columns (five arrays
		// among them) that only events read.
		enqueueManyStatuses: "SELECT e.i, (e.a).status, (e.a).err FROM " + enqueueManyCall,
		retry:               call("retry", 6),
		retryMany:           manyStatement(schema, "retry", "bytea", "bigint", "bigint", "bool", "bytea", "interval"),
		extendMany:          manyStatement(schema, "extend", "bytea", "bigint", "bigint", "bool", "interval"),
		setPriority:         call("set_priority", 2),
		claim: fmt.Sprintf("SELECT c.domain, c.off, c.payload, (c.a).* FROM %s.claim($1, $2, %s) c",
			schema, policyRow(schema, 3)),
		inspect: fmt.Sprintf("SELECT i.backlog, i.processed, i.failed, (i.a).* FROM %s.inspect($1, $2, %s) i", schema, policyRow(schema, 3)),
		// $1 domain, $2 monotonic offsets: Inspect on a read-only server,
		// which reads the domain as the server has it, in one snapshot,
		// without locking it or ending a lease that is due.
		inspectRead: fmt.Sprintf(`SELECT coalesce((SELECT array_agg(b.off ORDER BY b.pos) FROM %[1]s.backlog b WHERE b.domain = d.domain), '{}'),
	least(%[1]s.processed_count(d, $2), 9223372036854775807)::bigint,
	(SELECT count(*) FROM %[1]s.dead_letters x WHERE x.domain = d.domain),
	d.lease_off, d.fence, d.serial, d.lease_retries, d.lease_acquired_at, d.lease_expires_at, d.paused
FROM %[1]s.domains d WHERE d.domain = $1 AND NOT d.forgotten`, schema),
		reap: fmt.Sprintf("SELECT r.domain, r.off, r.fence, r.serial, r.attempts, r.dead, (r.a).* FROM %s.reap($1, $2, %s) r",
			schema, policyRow(schema, 3)),
		leases: fmt.Sprintf("SELECT domain, lease_off, fence, serial, lease_retries, lease_acquired_at, lease_expires_at "+
			"FROM %s.domains WHERE lease_off IS NOT NULL ORDER BY domain", schema),
		domains: fmt.Sprintf("SELECT domain FROM %s.domains WHERE NOT forgotten ORDER BY domain", schema),
		deadLetters: fmt.Sprintf("SELECT domain, off, why, cause, attempts, at FROM %s.dead_letters ORDER BY domain, off",
			schema),
		deadLettersOf: fmt.Sprintf("SELECT d.domain, d.off, d.why, d.cause, d.attempts, d.at FROM %s.dead_letters d WHERE %s ORDER BY d.off",
			schema, domainIs(schema, "d", "$1")),
		stats: fmt.Sprintf("SELECT (SELECT counts FROM %[1]s.meta), coalesce((SELECT array_agg(s ORDER BY i) FROM "+
			"(SELECT i, sum(c) AS s FROM %[1]s.domains, unnest(counts) WITH ORDINALITY AS u(c, i) GROUP BY i) t), '{}')", schema),
	}
}

// An answer is what a call's function returns (see the answer type in
// the schema).
type answer struct {
	status, err          int16
	hint                 *int64 // the backlog's head a Succeed or Fail hints at
	retryCount           int32
	head                 *int64 // the offset the domain grants next, if idle and running
	leaseOff             *int64
	fence, serial        int64
	attempts, retries    int32
	acquiredAt, expireAt *time.Time
	paused               bool
	evKinds              []int16
	evOffs               []int64
	evAttempts           []int32
	evFences             []int64
	evWhys               []int16
	at                   *time.Time // the call's time; NULL for an unknown domain
}

// dest returns where the columns of an answer scan to.
func (a *answer) dest() []any {
	return []any{&a.status, &a.err, &a.hint, &a.retryCount, &a.head, &a.leaseOff, &a.fence, &a.serial, &a.attempts,
		&a.retries, &a.acquiredAt, &a.expireAt, &a.paused, &a.evKinds, &a.evOffs, &a.evAttempts, &a.evFences, &a.evWhys, &a.at}
}

// call runs statement, a call of a function that returns an answer, with
// args, the call's time and the policy after them.
func (m *Manager) call(ctx context.Context, op, statement string, args ...any) (answer, error) {
	var a answer
	args = append(append(args, m.now()), m.policy()...)
	c, err := m.conn(ctx, op)
	if err != nil {
		return answer{}, err
	}
	defer c.release()
	if err := c.QueryRow(ctx, statement, args...).Scan(a.dest()...); err != nil {
		return answer{}, c.fail(op, err)
	}
	return a, nil
}

// A callConn is a connection of the pool that a call holds.
type callConn struct {
	*pgxpool.Conn
	m        *Manager
	readOnly bool // the server took no write: close the connection rather than release it
}

// conn takes a connection of the pool for a call that changes state. An
// error taking it means the call never reached the database; the call's
// own errors go through fail. Give it back with release.
func (m *Manager) conn(ctx context.Context, op string) (*callConn, error) {
	c, err := m.pool.Acquire(ctx)
	if err != nil {
		return nil, dbError(op, err)
	}
	return &callConn{Conn: c, m: m}, nil
}

// fail returns callError's error for err, the error of op on c, and notes
// whether the server took no write.
func (c *callConn) fail(op string, err error) error {
	err = callError(op, err)
	if errors.Is(err, ErrReadOnly) {
		c.readOnly = true
	}
	return err
}

// release gives c back to the pool. A connection to a server that took
// no write is closed instead, and so are the pool's idle connections and
// the connection WaitClaim listens on, which may reach the same server:
// the ones made next reach, through a connection string with
// target_session_attrs=read-write, the server that takes writes now.
func (c *callConn) release() {
	if c.readOnly {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Conn.Conn().Close(ctx) // the pool destroys a closed connection
		for _, idle := range c.m.pool.AcquireAllIdle(ctx) {
			_ = idle.Conn().Close(ctx)
			idle.Release()
		}
		c.m.listen.reconnect()
	}
	c.Conn.Release()
}

// callError wraps err, the error of a call that changes state, on a
// connection it holds (see Manager.conn). Each call is one statement in a
// transaction of its own: if the server refused it, or it never reached
// the server, nothing changed; otherwise the connection or the context
// ended after the call was sent (a context that ends while the answer is
// on its way is such an end), and it may have committed or not, which
// ErrOutcomeUnknown says.
func callError(op string, err error) error {
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	switch {
	case errors.As(err, &pgErr) && severity(pgErr) == "ERROR", // the statement failed: its transaction rolled back
		errors.As(err, &connectErr), pgconn.SafeToRetry(err): // it was not sent
		return dbError(op, err)
	}
	// A FATAL error ends the session, maybe after the commit.
	return fmt.Errorf("pg: %s: %w: %w", op, ErrOutcomeUnknown, err)
}

// retryDeadlocked runs call, a call of one transaction that locks several
// domains, again when PostgreSQL cancelled its transaction to break a
// deadlock (its changes rolled back), a few times at most. Calls that wait
// for locks take them in the order of the domains' names, but a claim that
// finds a row changed as it locks it waits for the change's transaction,
// holding the rows it locked before, in the order they were ready.
func retryDeadlocked[T any](call func() (T, error)) (T, error) {
	for tries := 1; ; tries++ {
		out, err := call()
		var pgErr *pgconn.PgError
		if err == nil || tries == 3 || !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			return out, err
		}
	}
}

// severity returns err's severity in English, whatever the server's
// language.
func severity(err *pgconn.PgError) string {
	if err.SeverityUnlocalized != "" {
		return err.SeverityUnlocalized
	}
	return err.Severity
}

// absent reports that the answer is for a domain the database does not
// know.
func (a *answer) absent() bool { return a.err == 10 }

// lease returns the domain's lease after the call, as domain's.
func (m *Manager) lease(domain string, a *answer) worklease.LeaseInfo {
	if a.leaseOff == nil {
		return worklease.LeaseInfo{}
	}
	return worklease.LeaseInfo{
		Domain: domain, Offset: *a.leaseOff, Token: m.token(a.fence, a.serial),
		AcquiredAt: timeOf(a.acquiredAt), ExpiresAt: timeOf(a.expireAt), RetryCount: int(a.retries),
	}
}

// headOf returns the domain's head after the call.
func headOf(a *answer) worklease.Head {
	if a.head == nil {
		return worklease.Head{}
	}
	return worklease.Head{Next: *a.head, HasNext: true}
}

// report tells the observer, if any, about the call's events: cause is
// the cause of the call (Fail's, Kill's reason), and rejected its error,
// and tok its token, for a rejection.
func (m *Manager) report(domain string, a *answer, cause error, tok worklease.Token, rejected error) {
	if m.cfg.Observer == nil {
		return
	}
	for i, k := range a.evKinds {
		ev := worklease.Event{
			Kind: worklease.EventKind(k), Domain: domain, Offset: a.evOffs[i], Attempt: int(a.evAttempts[i]),
			Token: m.token(a.evFences[i], a.serial), At: timeOf(a.at),
		}
		switch a.evWhys[i] {
		case 1:
			ev.Cause = worklease.ErrLeaseExpired
		case 2:
			ev.Cause = cause
		}
		if ev.Kind == worklease.EventRejected {
			ev.Token, ev.Cause = tok, rejected
		}
		m.cfg.Observer.Observe(ev)
	}
}
