package pg_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
	"github.com/worklease/worklease/worker"
)

// The shape of TestFailoverSynchronous.
const (
	foProcesses = 2               // worker processes, each with a Pool
	foWorkers   = 4               // in each Pool
	foDomains   = 20              // domains
	foOffsets   = 60              // offsets in each, half stored before the failover and half after
	foTTL       = 5 * time.Second // the leases' TTL
	foKillAt    = 0.4             // the share of the offsets acknowledged as processed when the primary is killed

	// foCarryOn bounds how long after the promotion each Pool acknowledges
	// its first success: a Pool that holds work carries on after its next
	// backoff delay, one that waits for work at its next poll (a second)
	// or notification. It leaves room for a loaded machine.
	foCarryOn = 10 * time.Second
)

// foBackoff is the Pools' backoff: calls that fail while no server takes
// writes are made again after it.
var foBackoff = worklease.Backoff{Base: 5 * time.Millisecond, Max: 200 * time.Millisecond}

// A primary and its synchronous standby; worker Pools in two processes
// work offsets through a connection string that names both servers. Once
// 40 % of the offsets are done, the primary is killed with SIGKILL and the
// standby promoted; the producer stores the second half of the offsets and
// the Pools carry on by themselves, through the same connection string.
// The work writes to storage through its fence, as a user's storage would:
// a holder takes the domain's row if no later holder took it, and writes
// its effect if no later holder took it since. Afterwards: every offset of
// every domain was processed, in order (an effect repeated only for an
// offset whose success was not acknowledged); no success acknowledged to a
// Pool, before or after the kill, was lost (its offset never ran again);
// no holder found a later holder's write, so no two holders of a domain
// overlapped; each Pool carried on within foCarryOn of the promotion; and
// a Manager opened afterwards on the same pool finds the new primary.
func TestFailoverSynchronous(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers and two processes")
	}
	rs := startReplicaSet(t, true)
	ctx := context.Background()
	pool := newReplicaPool(t, rs.URL, 4)
	opts := []worklease.Option{worklease.WithLeaseTTL(foTTL), worklease.WithMaxRetries(1000)}
	m, err := pg.Open(ctx, pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE fo_store (domain text PRIMARY KEY, fence bigint NOT NULL);"+
		"CREATE TABLE fo_effects (domain text NOT NULL, off bigint NOT NULL, fence bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	store := func(from, to int64) error {
		var items []pg.Item
		for d := range foDomains {
			for off := from; off < to; off++ {
				items = append(items, pg.Item{Domain: domainName(d), Offset: off})
			}
		}
		_, err := m.EnqueueMany(ctx, items)
		return err
	}
	if err := store(0, foOffsets/2); err != nil {
		t.Fatal(err)
	}

	log := newFailoverLog()
	children := startFailoverChildren(t, rs.URL, log)
	total := foDomains * foOffsets
	waitFor(t, 2*time.Minute, "the Pools to process 40 % of the offsets", func() (bool, error) {
		return log.ackCount() >= int(foKillAt*float64(total)), nil
	})
	rs.killPrimary(t)
	killed := time.Now()
	rs.promote(t)
	promoted := time.Now()
	log.promoted(promoted)
	t.Logf("primary killed; standby promoted in %v", promoted.Sub(killed).Round(time.Millisecond))

	// The producer stores the rest through the same Manager, as soon as
	// the new primary takes them: EnqueueMany is idempotent, so a batch
	// whose outcome is unknown is stored again.
	waitFor(t, time.Minute, "the new primary to take the second half", func() (bool, error) {
		return store(foOffsets/2, foOffsets) == nil, nil
	})
	stored := time.Now()
	waitFor(t, 2*time.Minute, "every offset to be processed", func() (bool, error) {
		for d := range foDomains {
			info, err := m.Inspect(ctx, domainName(d))
			if err != nil || info.Processed != foOffsets || info.Leased || len(info.Backlog) > 0 {
				return false, nil // errors while the Manager's pool finds the new primary
			}
		}
		return true, nil
	})
	for i, c := range children {
		if err := c.stop(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	for i, first := range log.firstAfter {
		t.Logf("process %d carried on %v after the promotion (the second half was stored %v after it)",
			i, first.Sub(promoted).Round(time.Millisecond), stored.Sub(promoted).Round(time.Millisecond))
		if took := first.Sub(promoted); took > foCarryOn {
			t.Errorf("process %d carried on %v after the promotion; want within %v", i, took.Round(time.Millisecond), foCarryOn)
		}
	}
	if len(log.firstAfter) != foProcesses {
		t.Errorf("%d of %d processes acknowledged a success after the promotion", len(log.firstAfter), foProcesses)
	}
	if log.stale > 0 {
		t.Errorf("%d writes found a later holder's write: two holders of a domain overlapped", log.stale)
	}

	// Every effect, in the order of its fence, per domain: the offsets in
	// order, each repeated only by a later attempt at it; none after its
	// acknowledged success.
	rows, err := pool.Query(ctx, "SELECT domain, off, fence FROM fo_effects ORDER BY domain, fence")
	if err != nil {
		t.Fatal(err)
	}
	type effect struct{ off, fence int64 }
	effects := make(map[string][]effect)
	for rows.Next() {
		var d string
		var e effect
		if err := rows.Scan(&d, &e.off, &e.fence); err != nil {
			t.Fatal(err)
		}
		effects[d] = append(effects[d], e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	repeated := 0
	for d := range foDomains {
		domain := domainName(d)
		next := int64(0)
		for i, e := range effects[domain] {
			switch {
			case e.off == next:
				next++
			case e.off == next-1:
				repeated++
			default:
				t.Errorf("%s: effect %d is offset %d (fence %d) after offset %d", domain, i, e.off, e.fence, next-1)
			}
			if acked, ok := log.acked[ackKey{domain, e.off}]; ok && e.fence > acked {
				t.Errorf("%s: offset %d ran again under fence %d after its success under fence %d was acknowledged",
					domain, e.off, e.fence, acked)
			}
		}
		if next != foOffsets {
			t.Errorf("%s: effects up to offset %d, want %d", domain, next-1, foOffsets-1)
		}
	}
	t.Logf("%d successes acknowledged to the Pools, %d effects repeated by attempts whose success was not",
		len(log.acked), repeated)

	// A Manager opened now on the same pool, which held connections to the
	// old primary, finds the new one.
	m2, err := pg.Open(ctx, pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if info, err := m2.Inspect(ctx, domainName(0)); err != nil || info.Processed != foOffsets {
		t.Fatalf("Inspect through a Manager opened after the failover: %+v, %v", info, err)
	}
}

// An ackKey is an offset of a domain.
type ackKey struct {
	domain string
	off    int64
}

// A failoverLog gathers what the worker processes report.
type failoverLog struct {
	mu         sync.Mutex
	acked      map[ackKey]int64 // the fence of each offset's acknowledged success
	stale      int              // writes that found a later holder's
	after      time.Time        // the promotion, once it happened
	firstAfter map[int]time.Time
}

func newFailoverLog() *failoverLog {
	return &failoverLog{acked: make(map[ackKey]int64), firstAfter: make(map[int]time.Time)}
}

func (l *failoverLog) ackCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *failoverLog) promoted(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.after = at
}

// read reads process i's reports until it closes its output; other lines
// (a test's failure, say) go to the test's log.
func (l *failoverLog) read(t *testing.T, i int, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "acked":
			off, err1 := strconv.ParseInt(f[2], 10, 64)
			fence, err2 := strconv.ParseInt(f[3], 10, 64)
			if err := errors.Join(err1, err2); err != nil {
				t.Errorf("process %d: %q: %v", i, sc.Text(), err)
				continue
			}
			now := time.Now()
			l.mu.Lock()
			l.acked[ackKey{f[1], off}] = fence
			if _, ok := l.firstAfter[i]; !ok && !l.after.IsZero() {
				l.firstAfter[i] = now
			}
			l.mu.Unlock()
		case len(f) > 0 && f[0] == "stale":
			l.mu.Lock()
			l.stale++
			l.mu.Unlock()
			t.Logf("process %d: %s", i, sc.Text())
		default:
			t.Logf("process %d: %s", i, sc.Text())
		}
	}
}

// A failoverChild is a worker process of TestFailoverSynchronous.
type failoverChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	read  chan struct{} // closed once its output is read
}

// stop closes the process's input, which stops its Pool, and waits for it.
func (c *failoverChild) stop() error {
	c.stdin.Close()
	<-c.read
	return c.cmd.Wait()
}

// startFailoverChildren starts the worker processes on url, which report
// to log.
func startFailoverChildren(t *testing.T, url string, log *failoverLog) []*failoverChild {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out []*failoverChild
	for i := range foProcesses {
		cmd := exec.Command(exe, "-test.run=^TestChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childRole+"=failover", childIndex+"="+strconv.Itoa(i), serverURL+"="+url)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &failoverChild{cmd: cmd, stdin: stdin, read: make(chan struct{})}
		go func() {
			defer close(c.read)
			log.read(t, i, stdout)
		}()
		out = append(out, c)
	}
	t.Cleanup(func() {
		for _, c := range out {
			if c.cmd.ProcessState == nil { // still running: the test failed
				_ = c.cmd.Process.Kill()
				<-c.read
				_ = c.cmd.Wait()
			}
		}
	})
	return out
}

// errStale is a worker's error for a write that found a later holder's.
var errStale = errors.New("a later holder wrote first")

// childFailover is a worker process of TestFailoverSynchronous: a Pool
// that writes each offset's effect through its fence, reporting each
// success acknowledged to it, until its input closes.
func childFailover(t *testing.T, pool *pgxpool.Pool) {
	ctx := context.Background()
	var out sync.Mutex // one report at a time
	report := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	acked := worklease.ObserverFunc(func(e worklease.Event) {
		if e.Kind == worklease.EventProcessed {
			report("acked %s %d %d", e.Domain, e.Offset, e.Token.Fence())
		}
	})
	m, err := pg.Open(ctx, pool, worklease.WithLeaseTTL(foTTL), worklease.WithMaxRetries(1000), worklease.WithObserver(acked))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	handler := func(ctx context.Context, j worker.Job) error {
		fence := int64(j.Token.Fence())
		// The holder takes the domain's row of the store, unless a later
		// holder did...
		tag, err := pool.Exec(ctx, "INSERT INTO fo_store AS s VALUES ($1, $2) ON CONFLICT (domain) DO UPDATE SET fence = $2 "+
			"WHERE s.fence < $2", j.Domain, fence)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			report("stale %s %d %d: a later holder took the domain first", j.Domain, j.Offset, fence)
			return errStale
		}
		// ...and writes its effect, unless a later holder took the row since.
		tag, err = pool.Exec(ctx, "WITH s AS (SELECT FROM fo_store WHERE domain = $1 AND fence = $3 FOR UPDATE) "+
			"INSERT INTO fo_effects SELECT $1, $2, $3 FROM s", j.Domain, j.Offset, fence)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			report("stale %s %d %d: a later holder took the domain during the work", j.Domain, j.Offset, fence)
			return errStale
		}
		return nil
	}
	p, err := worker.New(m, handler, worker.WithWorkers(foWorkers), worker.WithBackoff(foBackoff), worker.WithQueueLimit(0))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes it
	stop, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.Stop(stop); err != nil {
		t.Error(err)
	}
	if err := <-ran; err != nil {
		t.Error(err)
	}
	st := p.Stats()
	report("stats: %d succeeded, %d retried, %d leases lost, %d errors of calls", st.Succeeded, st.Retried, st.LeaseLost, st.Errors)
}

// A grantLog records the leases Backends granted, with the phase of the
// test when each call was made and when it was answered.
type grantLog struct {
	phase atomic.Int32 // phaseBefore, phaseKilling, then phasePromoted

	mu     sync.Mutex
	grants []grant
}

// The phases of TestFailoverLostCommits.
const (
	phaseBefore   = iota // the old primary runs
	phaseKilling         // from just before the kill until the promotion
	phasePromoted        // the standby was promoted
)

// A grant is a lease a call was answered with.
type grant struct {
	domain            string
	tok               worklease.Token
	invoked, answered int32 // the phases
}

func (l *grantLog) add(invoked int32, claims []worklease.Claim) {
	answered := l.phase.Load()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range claims {
		l.grants = append(l.grants, grant{c.Domain, c.Token, invoked, answered})
	}
}

func (l *grantLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.grants)
}

// A recordingBackend is a Backend that records the leases its claims
// grant: a worker Pool's WaitClaim and ClaimNext.
type recordingBackend struct {
	worklease.Backend
	log *grantLog
}

func (b recordingBackend) WaitClaim(ctx context.Context, n int, poll time.Duration) ([]worklease.Claim, error) {
	invoked := b.log.phase.Load()
	claims, err := b.Backend.WaitClaim(ctx, n, poll)
	b.log.add(invoked, claims)
	return claims, err
}

func (b recordingBackend) ClaimNext(ctx context.Context, claims []worklease.Claim) ([]worklease.Claim, []error, error) {
	invoked := b.log.phase.Load()
	next, errs, err := b.Backend.ClaimNext(ctx, claims)
	b.log.add(invoked, next)
	return next, errs, err
}

// A primary and an asynchronous standby that stops receiving the
// primary's log while two worker Pools work: the grants of the moments
// before the primary is killed are acknowledged to the Pools, and lost
// when the standby is promoted, with the fences that the domains' rows
// held. Every fence granted after the promotion is above every fence
// granted before it, in every domain, and no token is granted twice. A
// connection to the standby opened before the promotion, when it was read
// only, reads the new timeline after it.
func TestFailoverLostCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	const domains, offsets = 8, 1500
	rs := startReplicaSet(t, false)
	ctx := context.Background()
	opts := []worklease.Option{worklease.WithLeaseTTL(foTTL), worklease.WithMaxRetries(1000)}
	var managers []*pg.Manager
	for range 2 {
		m, err := pg.Open(ctx, newReplicaPool(t, rs.URL, 6), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		managers = append(managers, m)
	}
	var items []pg.Item
	for off := range int64(offsets) {
		for d := range domains {
			items = append(items, pg.Item{Domain: domainName(d), Offset: off})
		}
	}
	for len(items) > 0 {
		n := min(len(items), 2000)
		if _, err := managers[0].EnqueueMany(ctx, items[:n]); err != nil {
			t.Fatal(err)
		}
		items = items[n:]
	}

	log := &grantLog{}
	var pools []*worker.Pool
	ran := make(chan error, len(managers))
	for _, m := range managers {
		p, err := worker.New(recordingBackend{m, log}, func(context.Context, worker.Job) error { return nil },
			worker.WithWorkers(4), worker.WithBackoff(foBackoff), worker.WithQueueLimit(0))
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, p)
		go func() { ran <- p.Run(ctx) }()
	}
	stopPools := func() {
		for _, p := range pools {
			stop, cancel := context.WithTimeout(ctx, time.Minute)
			if err := p.Stop(stop); err != nil {
				t.Error(err)
			}
			cancel()
		}
		for range pools {
			if err := <-ran; err != nil {
				t.Error(err)
			}
		}
		pools = nil
	}
	defer func() {
		if pools != nil {
			stopPools()
		}
	}()
	waitFor(t, time.Minute, "the Pools to be granted 100 leases", func() (bool, error) { return log.count() >= 100, nil })

	rs.disconnectStandby(t)
	// What the standby holds of the domains, which its promotion keeps.
	kept := make(map[string]int64)
	standby, err := pgx.Connect(ctx, rs.standby.URL) // read only until the promotion
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close(ctx)
	rows, err := standby.Query(ctx, "SELECT convert_from(domain, 'UTF8'), fence FROM worklease.domains")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d string
		var fence int64
		if err := rows.Scan(&d, &fence); err != nil {
			t.Fatal(err)
		}
		kept[d] = fence
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := standby.Exec(ctx, "SELECT worklease.fence_floor()"); err == nil {
		t.Fatal("fence_floor on a standby: no error, want one (no grant can be written there)")
	}
	n := log.count()
	waitFor(t, time.Minute, "200 grants the standby does not receive", func() (bool, error) { return log.count() >= n+200, nil })

	log.phase.Store(phaseKilling)
	rs.killPrimary(t)
	rs.promote(t)
	log.phase.Store(phasePromoted)
	var floor int64
	if err := standby.QueryRow(ctx, "SELECT worklease.fence_floor()").Scan(&floor); err != nil || floor != 1<<40 {
		t.Errorf("fence_floor, on a connection opened before the promotion: %d, %v; want %d, the second timeline's", floor, err, int64(1)<<40)
	}
	waitFor(t, 2*time.Minute, "a grant in every domain after the promotion", func() (bool, error) {
		log.mu.Lock()
		defer log.mu.Unlock()
		seen := make(map[string]bool)
		for _, g := range log.grants {
			if g.invoked == phasePromoted {
				seen[g.domain] = true
			}
		}
		return len(seen) == domains, nil
	})
	stopPools()

	before, after := make(map[string]uint64), make(map[string]uint64)
	tokens := make(map[worklease.Token]grant)
	lost := 0
	for _, g := range log.grants {
		if prev, ok := tokens[g.tok]; ok {
			t.Errorf("token %v granted twice: %+v and %+v", g.tok, prev, g)
		}
		tokens[g.tok] = g
		f := g.tok.Fence()
		switch {
		case g.answered == phaseBefore:
			before[g.domain] = max(before[g.domain], f)
			if int64(f) > kept[g.domain] {
				// Acknowledged, and not on the promoted standby, whose next
				// grants would take these fences again if they went on from
				// the fences it holds.
				lost++
			}
		case g.invoked == phasePromoted:
			if a, ok := after[g.domain]; !ok || f < a {
				after[g.domain] = f
			}
		}
	}
	for d := range domains {
		domain := domainName(d)
		if after[domain] <= before[domain] {
			t.Errorf("%s: fence %d granted after the promotion, not above fence %d granted before", domain, after[domain], before[domain])
		}
	}
	if lost == 0 {
		t.Fatal("no grant acknowledged before the kill was lost: the test did not test what it means to")
	}
	t.Logf("%d grants, %d tokens; %d grants acknowledged before the kill were lost with the promotion; "+
		"the first fences after it: %v (above %v)", len(log.grants), len(tokens), lost, after, before)
}

// A Manager that finds itself on a server that takes no writes says so
// with ErrReadOnly, having changed nothing, and closes the connections
// that reach it; Inspect and the listings read what that server holds.
// Here a Manager on the standby's address alone is read-only; then the
// primary is set read-only (as a primary demoted in place would be), and a
// worker Pool whose pool names both servers for the one that takes writes
// backs off, until the standby is promoted: then the Pool finds it by
// itself and carries on, under fences of the new timeline.
func TestFailoverReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	rs := startReplicaSet(t, false)
	ctx := context.Background()
	pool := newReplicaPool(t, rs.URL, 4)
	m, err := pg.Open(ctx, pool, worklease.WithLeaseTTL(foTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	held, err := m.TryAcquire(ctx, "d", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Enqueue(ctx, "d", 1, []byte("one")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the standby to replay the primary's log", func() (bool, error) {
		var primary, replayed string
		if err := queryServer(rs.primary, "SELECT pg_current_wal_lsn()::text", nil, &primary); err != nil {
			return false, err
		}
		var done bool
		err := queryServer(rs.standby, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn, pg_last_wal_replay_lsn()::text", []any{primary}, &done, &replayed)
		return done, err
	})

	// A Manager on the standby alone: the schema is up to date, so Open
	// only reads it; calls that write are refused.
	standbyPool := newReplicaPool(t, rs.standby.URL, 2)
	ms, err := pg.Open(ctx, standbyPool)
	if err != nil {
		t.Fatalf("Open on the standby, whose schema is up to date: %v", err)
	}
	defer ms.Close()
	if _, err := pg.OpenSchema(ctx, standbyPool, "elsewhere"); !errors.Is(err, pg.ErrReadOnly) {
		t.Errorf("OpenSchema of a schema to install, on the standby: %v; want ErrReadOnly", err)
	}
	writes := map[string]func() error{
		"TryAcquire": func() error { _, err := ms.TryAcquire(ctx, "d", 5); return err },
		"Enqueue":    func() error { _, err := ms.Enqueue(ctx, "e", 0, nil); return err },
		"Claim":      func() error { _, err := ms.Claim(ctx, 1); return err },
		"Succeed":    func() error { _, err := ms.Succeed(ctx, "d", held.Token); return err },
		"Extend":     func() error { _, err := ms.Extend(ctx, "d", held.Token, time.Second); return err },
	}
	for name, call := range writes {
		if err := call(); !errors.Is(err, pg.ErrReadOnly) {
			t.Errorf("%s on the standby: %v; want ErrReadOnly", name, err)
		}
		// The pool destroys a closed connection in the background.
		waitFor(t, time.Minute, "the pool to close its connections to the standby after "+name, func() (bool, error) {
			return standbyPool.Stat().TotalConns() == 0, nil
		})
	}
	want, err := m.Inspect(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ms.Inspect(ctx, "d"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Inspect on the standby: %+v, %v; want the primary's %+v", got, err, want)
	}
	if leases, err := ms.Leases(ctx); err != nil || len(leases) != 1 || leases[0].Token != held.Token {
		t.Errorf("Leases on the standby: %+v, %v; want the lease of %v", leases, err, held.Token)
	}
	if page, err := ms.ListDomains(ctx, worklease.DomainQuery{}); err != nil || len(page.Domains) != 1 {
		t.Errorf("ListDomains on the standby: %+v, %v; want the one domain", page, err)
	}
	if totals, err := ms.Totals(ctx); err != nil || totals.Domains != 1 {
		t.Errorf("Totals on the standby: %+v, %v; want one domain", totals, err)
	}
	if _, err := ms.Stats(ctx); err != nil {
		t.Errorf("Stats on the standby: %v", err)
	}

	// A worker Pool on both servers, for the one that takes writes.
	if _, err := m.Succeed(ctx, "d", held.Token); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var fences []uint64     // of the attempts at the domain "after"
	var readOnly, other int // the Pool's failed calls
	errorFunc := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, pg.ErrReadOnly) {
			readOnly++
		} else {
			other++
		}
	}
	handler := func(_ context.Context, j worker.Job) error {
		mu.Lock()
		defer mu.Unlock()
		if j.Domain == "after" {
			fences = append(fences, j.Token.Fence())
		}
		return nil
	}
	p, err := worker.New(m, handler, worker.WithWorkers(2), worker.WithBackoff(foBackoff), worker.WithErrorFunc(errorFunc))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	defer func() {
		stop, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := p.Stop(stop); err != nil {
			t.Error(err)
		}
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()

	// The primary takes no more writes: its sessions read the setting at
	// their next statement.
	if err := execServer(rs.primary, "ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	var refused error
	for off := int64(0); ; off++ {
		_, refused = m.Enqueue(ctx, "before", off, nil)
		if refused != nil {
			break
		}
	}
	if !errors.Is(refused, pg.ErrReadOnly) {
		t.Fatalf("Enqueue on the primary set read-only: %v; want ErrReadOnly", refused)
	}
	// Inspect reads, on a connection to the primary still open (the Pool's
	// calls hold some), or says that the pool reaches no server that takes
	// writes, as it makes no connection to one that does not. The Pool may
	// have run offset 1 before the primary stopped taking writes.
	if info, err := m.Inspect(ctx, "d"); err != nil && !errors.Is(err, pg.ErrReadOnly) ||
		err == nil && (info.Processed < 1 || info.Processed > 2) {
		t.Errorf("Inspect with no server that takes writes: %+v, %v; want offset 0 (and perhaps 1) processed, or ErrReadOnly", info, err)
	}
	waitFor(t, time.Minute, "the Pool to find the server read-only", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return readOnly > 0, nil
	})

	rs.promote(t)
	promoted := time.Now()
	// The application stores work through the standby's address, which now
	// takes writes; the Pool finds it on its own.
	for off := range int64(3) {
		waitFor(t, time.Minute, "the promoted standby to take an offset", func() (bool, error) {
			_, err := ms.Enqueue(ctx, "after", off, nil)
			return err == nil, nil
		})
	}
	waitFor(t, time.Minute, "the Pool to run the offsets stored after the promotion", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(fences) == 3, nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, f := range fences {
		if f <= 1<<40 {
			t.Errorf("fence %d granted on the second timeline; want above %d", f, uint64(1)<<40)
		}
	}
	t.Logf("the Pool ran the offsets %v after the promotion; its calls failed %d times with ErrReadOnly, %d otherwise",
		time.Since(promoted).Round(time.Millisecond), readOnly, other)
}
