package pg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
)

// ErrOutcomeUnknown is returned, wrapping the cause, by a call whose
// connection or context ended after the call reached the database and
// before its answer came back: the call may have happened or not. A retry
// finds out, since calls are idempotent where it matters: TryAcquire
// answers AlreadyAcquired (or AlreadyProcessed) for an offset the lost call
// granted (or finished), and Succeed of a lease the lost call finished
// refuses the token (ErrNoLease, or ErrTokenMismatch once the domain granted
// another lease). A Claim whose outcome is unknown may have granted leases
// whose tokens nobody has: with the pull queue, set a lease TTL
// (worklease.WithLeaseTTL), so that later claims take them over, or find
// them with Leases and end them with ForceRelease.
var ErrOutcomeUnknown = errors.New("pg: outcome unknown")

// ErrReadOnly is returned, wrapping the cause, by a call that reached a
// server that takes no writes, and so changed nothing: a standby, or a
// primary set read-only (SQLSTATE 25006, read_only_sql_transaction), or,
// when the pool connects with target_session_attrs=read-write, no server
// of its connection string that takes writes. The Manager then closes the
// connection that reached such a server rather than give it back to the
// pool, with the pool's idle connections and the one WaitClaim listens on
// (Open closes the one it used), so that the next calls connect again:
// through a connection string that names the primary and its standbys
// with target_session_attrs=read-write, they find whichever server takes
// writes, the standby promoted after a failover, say. Calls that only read
// (Inspect, Leases, Domains, DeadLetters, Stats, Totals and the listings)
// work on a read-only server the pool reaches.
var ErrReadOnly = errors.New("pg: server is read-only")

// DefaultSchema is the schema Open installs its tables and functions in.
const DefaultSchema = "worklease"

// A Manager grants exclusive, ordered work leases per domain, keeping them
// in PostgreSQL: every Manager on the same database and schema, in any
// process, shares them. It is safe for concurrent use. Its calls behave as
// worklease.Manager's methods of the same name document.
type Manager struct {
	pool     *pgxpool.Pool
	schema   string // quoted
	cfg      worklease.Config
	instance uint64 // the database's part of every token
	closed   atomic.Bool
	listen   listener // for WaitClaim
	vacuum   vacuumer // for claims
	// recheck is WaitClaim's first wait after a claim that found nothing,
	// recheckFirst; 0 in tests of the notifications, where only the poll
	// and a notification end a wait.
	recheck time.Duration

	// The statements of the calls, with the schema in them.
	sql  statements
	fast fastStatements
	pull pullStatements
}

// Open returns a Manager on pool that keeps its state in DefaultSchema,
// installing or upgrading the schema first. That takes a role that may
// create the schema and its tables; a schema already up to date is only
// read, so a role that may merely use its tables, sequences and functions
// opens it. opts are worklease's options, read as worklease.New reads
// them, with the same defaults; of the in-memory Manager's own,
// WithJournal is refused (the database is the journal) and WithShards has
// no effect. The pool stays the caller's: Close does not close it.
//
// Open waits, within ctx, for a database that is starting: while the
// server refuses connections for now (nothing listens yet, or it answers
// that it is starting up, recovering or shutting down), Open tries again
// after a short pause, up to a second, until it connects or ctx ends. Give
// ctx a deadline as long as a restart may take: with one that never ends,
// an address where nothing listens (a wrong port, say) keeps Open waiting.
// Other errors of connecting are returned at once. Its errors start with
// "pg: open:" when it could not connect.
func Open(ctx context.Context, pool *pgxpool.Pool, opts ...worklease.Option) (*Manager, error) {
	return OpenSchema(ctx, pool, DefaultSchema, opts...)
}

// OpenSchema is Open with the state in schema, which it creates if need
// be: several independent sets of domains can share a database, each in a
// schema of its own. The name is 1 to 63 bytes of a-z, 0-9 and _, and does
// not start with a digit.
func OpenSchema(ctx context.Context, pool *pgxpool.Pool, schema string, opts ...worklease.Option) (*Manager, error) {
	cfg, err := worklease.NewConfig(opts...)
	if err != nil {
		return nil, err
	}
	if cfg.Journal != nil {
		return nil, fmt.Errorf("%w: WithJournal: the database is the journal", worklease.ErrInvalidConfig)
	}
	if cfg.MaxRetries > math.MaxInt32 {
		return nil, fmt.Errorf("%w: WithMaxRetries(%d): the database keeps up to %d", worklease.ErrInvalidConfig, cfg.MaxRetries, math.MaxInt32)
	}
	if !validSchema(schema) {
		return nil, fmt.Errorf("%w: schema name %q: want 1 to 63 of a-z, 0-9 and _, not starting with a digit", worklease.ErrInvalidConfig, schema)
	}
	m := &Manager{pool: pool, schema: pgx.Identifier{schema}.Sanitize(), cfg: cfg, vacuum: vacuumer{every: vacuumEvery}, recheck: recheckFirst}
	if err := waitForDatabase(ctx, pool); err != nil {
		return nil, err
	}
	if m.instance, err = migrate(ctx, pool, m.schema); err != nil {
		return nil, err
	}
	m.sql, m.fast, m.pull = newStatements(m.schema), newFastStatements(m.schema), newPullStatements(m.schema)
	return m, nil
}

// validSchema reports whether name is a schema name OpenSchema takes: one
// that needs no quoting, so that it can go anywhere in the schema's SQL,
// and that PostgreSQL keeps whole (it cuts names at 63 bytes).
func validSchema(name string) bool {
	if len(name) == 0 || len(name) > 63 || '0' <= name[0] && name[0] <= '9' {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Close marks the Manager closed: every later call returns an error
// matching worklease.ErrClosed. It closes the connection WaitClaim
// listens on, if any, and cancels the Manager's vacuum of the queue's
// tables if one is under way (see Claim), but does not close the pool.
func (m *Manager) Close() error {
	if m.closed.Swap(true) {
		return worklease.ErrClosed
	}
	m.listen.close()
	m.vacuum.close()
	return nil
}

// connect opens a connection of the Manager's own, outside its pool, as
// the pool opens one: with a copy of its connection settings, and its
// BeforeConnect and AfterConnect hooks. Close it with disconnect.
func (m *Manager) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := m.pool.Config()
	if cfg.BeforeConnect != nil {
		if err := cfg.BeforeConnect(ctx, cfg.ConnConfig); err != nil {
			return nil, err
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, err
	}
	if cfg.AfterConnect != nil {
		if err := cfg.AfterConnect(ctx, conn); err != nil {
			_ = conn.Close(ctx)
			return nil, err
		}
	}
	return conn, nil
}

// disconnect closes conn, a connection of connect's, as the pool closes
// one: after its BeforeClose hook.
func (m *Manager) disconnect(conn *pgx.Conn) {
	if hook := m.pool.Config().BeforeClose; hook != nil {
		hook(conn)
	}
	_ = conn.Close(context.Background())
}

// now returns the time of a call: the Clock's, or nil for the database's.
func (m *Manager) now() any {
	if m.cfg.Clock == nil {
		return nil
	}
	return m.cfg.Clock.Now()
}

// policy returns the arguments that make the policy of the calls, in the
// order of the policy type's fields.
func (m *Manager) policy() []any {
	return []any{m.cfg.MaxRetries, m.ttl(), m.cfg.Ordering == worklease.LIFO, m.cfg.BestEffortOrdering,
		m.cfg.ParkOnDeadLetter, m.cfg.MonotonicOffsets}
}

// ttl returns the lease TTL in microseconds, 0 for none.
func (m *Manager) ttl() int64 {
	ttl := m.cfg.LeaseTTL.Microseconds()
	if ttl == 0 && m.cfg.LeaseTTL > 0 {
		ttl = 1 // the database keeps microseconds
	}
	return ttl
}

// check returns the error a call with domain and offset gets before it
// reaches the database, in the order the in-memory Manager checks them.
func (m *Manager) check(op, domain string, offset int64) error {
	switch {
	case m.closed.Load():
		return fmt.Errorf("pg: %s: %w", op, worklease.ErrClosed)
	case domain == "" || len(domain) > worklease.MaxDomainLen:
		return domainError(op, domain, worklease.ErrInvalidDomain)
	case offset < 0:
		return domainError(op, domain, fmt.Errorf("%w: %d", worklease.ErrInvalidOffset, offset))
	}
	return nil
}

// errorOf returns the error an answer's code stands for.
func errorOf(code int16) error {
	switch code {
	case 1, 10:
		return worklease.ErrNoLease
	case 2:
		return worklease.ErrTokenMismatch
	case 3:
		return worklease.ErrLeaseExpired
	case 4:
		return worklease.ErrLeaseRevoked
	case 6:
		return worklease.ErrNotDeadLettered
	case 7:
		return worklease.ErrAlreadyProcessed
	case 8:
		return worklease.ErrDomainBusy
	case 9:
		return worklease.ErrOffsetAhead
	case 11:
		return worklease.ErrPayloadMismatch
	case 12:
		return worklease.ErrNotQueued
	case 13:
		return worklease.ErrInFlight
	case 14:
		return fmt.Errorf("%w: the domain holds the highest offset", worklease.ErrInvalidOffset)
	}
	return fmt.Errorf("pg: unknown error code %d", code)
}

// domainError wraps err, the error of call op on domain, which it names
// as the in-memory Manager's errors do (see shortDomain).
func domainError(op, domain string, err error) error {
	return fmt.Errorf("pg: %s on domain %s: %w", op, shortDomain(domain), err)
}

// dbError wraps an error of the database.
func dbError(op string, err error) error {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case readOnly(err):
		return fmt.Errorf("pg: %s: %w: %w", op, ErrReadOnly, err)
	}
	return fmt.Errorf("pg: %s: %w", op, err)
}

// readOnly reports whether err says that the server takes no writes: the
// server refused a write (SQLSTATE 25006), or, with target_session_attrs,
// no server of the connection string takes writes.
func readOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "25006" ||
		errors.Is(err, pgconn.ErrReadOnlyConnection) || errors.Is(err, pgconn.ErrStandbyConnection)
}

// token returns the token of a grant with fence in the domain with serial.
func (m *Manager) token(fence, serial int64) worklease.Token {
	if fence <= 0 || serial <= 0 {
		return worklease.Token{}
	}
	tok, err := worklease.NewToken(uint64(fence), uint64(serial), m.instance)
	if err != nil {
		return worklease.Token{} // unreachable: every part is non-zero
	}
	return tok
}

// timeOf returns t, or the zero time for a NULL.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
