package pg

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A claim reads the index of ready domains from its oldest end, and the
// head of a domain's backlog from its oldest offset. A busy queue leaves
// there the entries of the domains and offsets it took, dead until vacuum
// removes them. Autovacuum looks at a table at most once a minute by
// default, a server setting that no table's settings shorten: in between,
// a queue working a few thousand offsets a second leaves a claim more and
// more of them to read past, and a sustained run went at half the rate
// of a short one.
//
// So the Manager vacuums the two tables itself, in a goroutine of its
// own, once its claims (and ClaimNext) have granted vacuumEvery leases
// since its last vacuum began, and no sooner than vacuumPace times as long
// as that vacuum took after it ended: however large the tables, vacuuming
// takes at most a small share of one connection's time. It vacuums on a
// connection of its own (see Manager.connect), as WaitClaim listens on
// one, so that it takes none of the pool's connections from the calls and
// the pool's Close waits for none.
//
// It is housekeeping, best effort. It leaves out a table that autovacuum
// or another process is vacuuming, and skips one whose vacuum began the
// moment after it looked (SKIP_LOCKED; the server logs a warning then).
// The server cancels a vacuum that runs longer than vacuumLimit, and the
// one under way when the Manager closes. A failed one is tried again
// later. A Manager whose role does not own the tables (as PostgreSQL 15
// requires) never tries, rather than have the server log a warning for
// each table every time. It leaves the tables' ends (TRUNCATE false:
// shortening a table locks out every call while it does) and their TOAST
// tables to autovacuum.

// vacuumEvery is how many leases a Manager's claims grant between two of
// its vacuums.
const vacuumEvery = 2000

// vacuumPace is how many times as long as the last vacuum took the next
// waits at least, after it ended.
const vacuumPace = 20

// vacuumLimit is the longest a vacuum runs.
const vacuumLimit = time.Minute

// A vacuumer starts the Manager's vacuums, one at a time.
type vacuumer struct {
	every int // vacuumEvery, or fewer in tests

	mu      sync.Mutex    // guards the fields below
	granted int           // leases granted since the last vacuum began
	keyed   int           // idempotency keys stored since the last vacuum began
	running bool          // a vacuum is under way
	after   time.Time     // the next vacuum begins no sooner
	closed  bool          // by Close: no vacuum starts again
	checked bool          // whether the Manager's role may vacuum the tables is known
	allowed bool          // it may
	stop    func()        // ends the last vacuum begun
	stopped chan struct{} // closed when it ends
}

// noteGrants notes that the Manager's claims granted n leases, and starts a
// vacuum if one is due.
func (m *Manager) noteGrants(n int) {
	v := &m.vacuum
	v.mu.Lock()
	defer v.mu.Unlock()
	v.granted += n
	m.startVacuum()
}

// noteKey notes that an Append stored an idempotency key, and starts a
// vacuum, which prunes the keys past the key window, if one is due.
func (m *Manager) noteKey() {
	v := &m.vacuum
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keyed++
	m.startVacuum()
}

// startVacuum starts a vacuum if one is due: after vacuumEvery grants (if
// the role may vacuum) or keys stored. The caller holds v.mu.
func (m *Manager) startVacuum() {
	v := &m.vacuum
	grants := v.granted >= v.every && (!v.checked || v.allowed)
	if v.closed || v.running || !grants && v.keyed < v.every || time.Now().Before(v.after) {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	v.granted, v.keyed, v.running, v.stop, v.stopped = 0, 0, true, cancel, make(chan struct{})
	go m.vacuumTables(ctx, cancel, v.stopped)
}

// vacuumTables vacuums the tables claims read, until ctx ends.
func (m *Manager) vacuumTables(ctx context.Context, cancel func(), stopped chan<- struct{}) {
	defer close(stopped)
	defer cancel()
	began := time.Now()
	m.vacuumOnce(ctx) // an error changes nothing: the claims after start another
	ended := time.Now()
	v := &m.vacuum
	v.mu.Lock()
	v.running, v.after = false, ended.Add(vacuumPace*ended.Sub(began))
	v.mu.Unlock()
}

// vacuumOnce connects and vacuums the tables, if the Manager's role may.
// The server ends a statement that runs longer than vacuumLimit, set once
// the pool's hooks have run (so that none undoes it) and by a statement,
// which a connection pooler such as PgBouncer lets through where it would
// refuse the setting at connection time. (A ctx that ends closes the
// connection, and pgx then asks the server to cancel the statement under
// way.) Should the server or the network stop answering, the vacuum gives
// up a little after the server would have cancelled it. Statements this
// seldom run are sent as they are, not prepared.
func (m *Manager) vacuumOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, vacuumLimit+10*time.Second)
	defer cancel()
	conn, err := m.connect(ctx)
	if err != nil {
		return
	}
	defer m.disconnect(conn)
	const simple = pgx.QueryExecModeSimpleProtocol
	limit := "SET statement_timeout = " + strconv.FormatInt(vacuumLimit.Milliseconds(), 10)
	if _, err := conn.Exec(ctx, limit, simple); err != nil {
		return
	}
	m.pruneKeys(ctx, conn)
	if !m.mayVacuum(ctx, conn) {
		return
	}
	var tables string
	if err := conn.QueryRow(ctx, m.pull.idleTables, simple).Scan(&tables); err == nil && tables != "" {
		_, _ = conn.Exec(ctx, m.pull.vacuum+tables, simple)
	}
}

// mayVacuum reports whether the Manager's role may vacuum the tables,
// asking the database on conn the first time (and again after an error).
func (m *Manager) mayVacuum(ctx context.Context, conn *pgx.Conn) bool {
	v := &m.vacuum
	v.mu.Lock()
	checked, allowed := v.checked, v.allowed
	v.mu.Unlock()
	if checked {
		return allowed
	}
	err := conn.QueryRow(ctx, m.pull.mayVacuum, pgx.QueryExecModeSimpleProtocol).Scan(&allowed)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.checked, v.allowed = err == nil, err == nil && allowed
	return v.allowed
}

// close ends the vacuum under way, if any, and waits for it.
func (v *vacuumer) close() {
	v.mu.Lock()
	v.closed = true
	stop, stopped := v.stop, v.stopped
	v.mu.Unlock()
	if stopped != nil { // a vacuum began: the last may be ending yet
		stop()
		<-stopped
	}
}

// pruneKeysBatch is how many idempotency keys one statement of a vacuum
// deletes at most.
const pruneKeysBatch = 10_000

// pruneKeys deletes the idempotency keys past the key window, a batch at
// a time, on conn, which any role that may use the schema may do.
func (m *Manager) pruneKeys(ctx context.Context, conn *pgx.Conn) {
	for {
		var n int64
		err := conn.QueryRow(ctx, m.pull.pruneKeys, pgx.QueryExecModeSimpleProtocol,
			m.cfg.KeyWindow.Microseconds(), m.now(), pruneKeysBatch).Scan(&n)
		if err != nil || n < pruneKeysBatch {
			return
		}
	}
}
