package pg_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// The tests below start processes of their own: the test binary again,
// running one of the child tests with these variables set.
const (
	childRole   = "WORKLEASE_PG_CHILD"        // which child test to be: "work", "pull", "race", "failover" or "linearizable"
	childSchema = "WORKLEASE_PG_CHILD_SCHEMA" // the schema the processes share
	childIndex  = "WORKLEASE_PG_CHILD_INDEX"  // this process's number
)

// The shape of TestManyProcesses.
const (
	mpProcesses  = 3                      // worker processes; the first is killed mid-way
	mpGoroutines = 6                      // workers in each
	mpDomains    = 12                     // each produced by one process, worked by any
	mpOffsets    = 100                    // offered in each domain, in order
	mpWork       = 2 * time.Millisecond   // an attempt's work
	mpTTL        = 400 * time.Millisecond // leases of stalled or killed workers expire
	mpRun        = 3 * time.Second        // how long the processes work
	mpRetries    = 1000                   // failures and expiries retry, and never give up
)

// startChildren starts n processes of the test binary as role on schema,
// with the test's server.
func startChildren(t *testing.T, role, schema string, n int) []*exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for i := range n {
		cmd := exec.Command(exe, "-test.run=^TestChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childRole+"="+role, childSchema+"="+schema, childIndex+"="+strconv.Itoa(i))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	return cmds
}

// TestChild is what a process the tests start does; run alone, it does
// nothing.
func TestChild(t *testing.T) {
	role := os.Getenv(childRole)
	if role == "" {
		t.Skip("a child process's test, run by TestManyProcesses, TestManyProcessesPull, TestOneWinner, TestFailoverSynchronous and TestLinearizable")
	}
	index, _ := strconv.Atoi(os.Getenv(childIndex))
	pool := testPool(t)
	switch role {
	case "work":
		childWork(t, pool, os.Getenv(childSchema), index)
	case "race":
		childRace(t, pool, os.Getenv(childSchema), index)
	case "pull":
		childPull(t, pool, os.Getenv(childSchema), index)
	case "failover":
		childFailover(t, pool)
	case "linearizable":
		childLinearizable(t, pool, os.Getenv(childSchema))
	}
}

// Several processes, each with several workers, share domains on one
// database: offsets offered in order by one producer per domain, worked by
// whichever worker holds the domain's lease, with failures, workers that
// stall past their lease's TTL, and one process killed with SIGKILL while
// it holds leases. Afterwards, with the work finished: every domain's
// offsets succeeded in order, each exactly once; no worker wrote through
// a fence older than one already written (a stale holder) and then had its
// Succeed accepted; and the killed process's leases were taken over.
func TestManyProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes for seconds")
	}
	pool := testPool(t)
	ctx := context.Background()
	m, schema := newManager(t, pool, worklease.WithLeaseTTL(mpTTL), worklease.WithMaxRetries(mpRetries))
	s := createHistory(t, pool, schema)
	if _, err := pool.Exec(ctx, "CREATE TABLE "+s+".offers (domain text PRIMARY KEY, next bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for d := range mpDomains {
		if _, err := pool.Exec(ctx, "INSERT INTO "+s+".offers VALUES ($1, 0)", domainName(d)); err != nil {
			t.Fatal(err)
		}
	}

	cmds := startChildren(t, "work", schema, mpProcesses)
	// Kill the first process while it works: its workers hold leases.
	killWorking(t, pool, s, cmds[0])
	for i, c := range cmds {
		err := c.Wait()
		if i == 0 {
			continue
		}
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	// Finish what is left, as a process that starts afterwards would:
	// the killed process's leases expire and are taken over.
	time.Sleep(mpTTL)
	if _, err := m.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	for d := range mpDomains {
		domain := domainName(d)
		drain(t, ctx, m, pool, s, domain)
		for {
			err := offerAndWork(ctx, m, pool, s, domain, nil)
			if errors.Is(err, errOffered) {
				break
			}
			if err != nil {
				t.Fatalf("finishing %s: %v", domain, err)
			}
		}
		drain(t, ctx, m, pool, s, domain)
	}
	settled := settleKilled(t, pool, s, cmds[0].Process.Pid)
	checkHistory(t, pool, s)
	checkTakenOver(t, pool, s, cmds[0].Process.Pid, settled)
}

// createHistory creates the tables in schema where the workers of the
// multi-process tests record what they do, and returns the schema's
// quoted name: each domain's latest fence written (the store the work
// writes through), each success (recorded before Succeed, confirmed
// after), the writes a later holder's fence refused, and each attempt.
func createHistory(t *testing.T, pool *pgxpool.Pool, schema string) string {
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(context.Background(), "CREATE TABLE "+s+".fences (domain text PRIMARY KEY, fence bigint NOT NULL);"+
		"CREATE TABLE "+s+".succeeded (domain text NOT NULL, off bigint NOT NULL, fence bigint NOT NULL, pid int NOT NULL, ok bool NOT NULL);"+
		"CREATE TABLE "+s+".stale (domain text NOT NULL, off bigint NOT NULL, fence bigint NOT NULL, accepted bool NOT NULL);"+
		"CREATE TABLE "+s+".attempts (domain text NOT NULL, off bigint NOT NULL, fence bigint NOT NULL, pid int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return s
}

// settleKilled settles the successes process pid recorded but never
// confirmed, as it was killed: one happened if and only if nobody
// succeeded its offset later, as a processed offset is never leased again.
// It returns how many happened: a process killed right after one may have
// died holding the lease of the domain's next offset, which SucceedNext
// gave it, before it recorded an attempt of that offset.
func settleKilled(t *testing.T, pool *pgxpool.Pool, s string, pid int) (happened int) {
	ctx := context.Background()
	if err := pool.QueryRow(ctx, "WITH u AS (UPDATE "+s+".succeeded a SET ok = NOT EXISTS (SELECT FROM "+s+
		".succeeded x WHERE x.domain = a.domain AND x.off = a.off AND x.fence > a.fence) WHERE NOT ok AND pid = $1 RETURNING ok) "+
		"SELECT count(*) FILTER (WHERE ok) FROM u", pid).Scan(&happened); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM "+s+".succeeded WHERE NOT ok AND pid = $1", pid); err != nil {
		t.Fatal(err)
	}
	return happened
}

// killWorking kills cmd with SIGKILL halfway through the processes' run,
// once it has been working for a while and holds a lease: a loaded machine
// may start it late, or slow it until its run is over, and a process
// killed holding no lease tests nothing. It looks for the lease with the
// process paused, so that the kill finds it still holding it.
func killWorking(t *testing.T, pool *pgxpool.Pool, s string, cmd *exec.Cmd) {
	t.Helper()
	time.Sleep(mpRun / 2)
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+s+".attempts WHERE pid = $1",
			pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= 5 {
			// Look with the process paused: one that ran on between the
			// look and the kill could finish its attempt first, and die
			// holding nothing. A statement it sent before the pause may
			// still record a success, which settleKilled then counts.
			if err := pausePID(pid); err != nil {
				t.Fatal(err)
			}
			if open, _ := unfinishedAttempts(t, pool, s, pid); open > 0 {
				break
			}
			if err := resumePID(pid); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d made %d attempts in a minute, and holds no lease", pid, n)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// unfinishedAttempts returns how many of the latest attempts of process
// pid, one a domain, it has not finished, and how many of those succeeded
// later under a larger fence.
func unfinishedAttempts(t *testing.T, pool *pgxpool.Pool, s string, pid int) (unfinished, takenOver int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE EXISTS (
			SELECT FROM `+s+`.succeeded x WHERE x.ok AND x.domain = a.domain AND x.off = a.off AND x.fence > a.fence))
		FROM `+s+`.attempts a
		WHERE a.pid = $1 AND NOT EXISTS (SELECT FROM `+s+`.succeeded x WHERE x.ok AND x.domain = a.domain AND x.fence = a.fence)
			AND a.fence = (SELECT max(b.fence) FROM `+s+`.attempts b WHERE b.domain = a.domain AND b.pid = a.pid)`,
		pid).Scan(&unfinished, &takenOver); err != nil {
		t.Fatal(err)
	}
	return unfinished, takenOver
}

// checkTakenOver checks that the last attempts of the killed process pid,
// which it never finished, were taken over: each offset succeeded later,
// under a larger fence.
//
// A process killed after it recorded its attempt holds that attempt's
// lease, and one killed right after a success it had not confirmed
// (settled, here) may hold only a lease it had not recorded an attempt of
// yet: a kill that left neither tested nothing.
func checkTakenOver(t *testing.T, pool *pgxpool.Pool, s string, pid, settled int) {
	orphans, takenOver := unfinishedAttempts(t, pool, s, pid)
	if orphans == 0 && settled == 0 {
		t.Errorf("the killed process left no attempt unfinished and no success unconfirmed: it died holding no lease")
	}
	if takenOver != orphans {
		t.Errorf("%d of the killed process's %d leases were taken over", takenOver, orphans)
	}
	t.Logf("the killed process left %d attempts unfinished (in flight when it died, or expired before), all taken over", orphans)
}

func domainName(d int) string { return fmt.Sprintf("domain-%02d", d) }

// childWork is one worker process of TestManyProcesses: each of its
// workers offers the next offset of a domain drawn at random, and works
// whatever that leases it.
func childWork(t *testing.T, pool *pgxpool.Pool, schema string, index int) {
	// Workers stop taking new work at the deadline, and finish what they
	// hold: a call cut short by a context would leave its outcome unknown.
	deadline := time.Now().Add(mpRun)
	ctx := context.Background()
	// A worker holds a connection for its offer while the offer takes
	// another.
	cfg := pool.Config()
	cfg.MaxConns = 2*mpGoroutines + 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := pg.OpenSchema(context.Background(), pool, schema, worklease.WithLeaseTTL(mpTTL), worklease.WithMaxRetries(mpRetries))
	if err != nil {
		t.Fatal(err)
	}
	s := pgx.Identifier{schema}.Sanitize()
	var wg sync.WaitGroup
	for g := range mpGoroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(index), uint64(g)))
			behave := func() string {
				switch r := rng.IntN(100); {
				case r < 10:
					return "fail"
				case r < 14:
					return "stall"
				}
				return "succeed"
			}
			for time.Now().Before(deadline) {
				err := offerAndWork(ctx, m, pool, s, domainName(rng.IntN(mpDomains)), behave)
				if errors.Is(err, errOffered) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					t.Errorf("process %d: %v", index, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// errOffered is offerAndWork's error for a domain whose every offset was
// offered.
var errOffered = errors.New("every offset offered")

// offerAndWork offers domain's next offset and works what that leases: the
// offset, or the head of a backlog that waits for it (an expired lease's
// offset). Offers of a domain are serialized across processes by a lock
// on its row of the offers table, so that offsets arrive in order;
// behave says how each attempt ends (nil: succeed).
func offerAndWork(ctx context.Context, m *pg.Manager, pool *pgxpool.Pool, s, domain string, behave func() string) error {
	type leased struct {
		offset int64
		tok    worklease.Token
	}
	var work []leased
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var offset int64
		err := tx.QueryRow(ctx, "UPDATE "+s+".offers SET next = next + 1 WHERE domain = $1 AND next < $2 RETURNING next - 1",
			domain, mpOffsets).Scan(&offset)
		if errors.Is(err, pgx.ErrNoRows) {
			return errOffered
		}
		if err != nil {
			return err
		}
		res, err := m.TryAcquire(ctx, domain, offset)
		var order *worklease.BacklogOrderError
		if errors.As(err, &order) {
			var head worklease.AcquireResult
			if head, err = m.TryAcquire(ctx, domain, order.Expected); err != nil {
				return err
			}
			if head.Status == worklease.Acquired {
				work = append(work, leased{order.Expected, head.Token})
			}
			res, err = m.TryAcquire(ctx, domain, offset) // now queued behind it
		}
		if err != nil {
			return err
		}
		if res.Status == worklease.Acquired {
			work = append(work, leased{offset, res.Token})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, l := range work {
		if err := workOffsets(ctx, m, pool, s, domain, l.offset, l.tok, behave); err != nil {
			return err
		}
	}
	return nil
}

// workOffsets works offset under tok, then each offset SucceedNext or
// FailNext leases it next.
func workOffsets(ctx context.Context, m *pg.Manager, pool *pgxpool.Pool, s, domain string, offset int64, tok worklease.Token, behave func() string) error {
	for {
		how := "succeed"
		if behave != nil {
			how = behave()
		}
		if _, err := pool.Exec(ctx, "INSERT INTO "+s+".attempts VALUES ($1, $2, $3, $4)", domain, offset, int64(tok.Fence()), os.Getpid()); err != nil {
			return err
		}
		time.Sleep(mpWork)
		if how == "stall" {
			time.Sleep(mpTTL + mpTTL/2)
		}
		// The work's write, through the fence: the store takes it only if
		// no later holder of the domain wrote before.
		tag, err := pool.Exec(ctx, "INSERT INTO "+s+".fences AS f (domain, fence) VALUES ($1, $2) "+
			"ON CONFLICT (domain) DO UPDATE SET fence = $2 WHERE f.fence <= $2", domain, int64(tok.Fence()))
		if err != nil {
			return err
		}
		stale := tag.RowsAffected() == 0
		if how == "fail" {
			res, err := m.FailNext(ctx, domain, tok, errors.New("boom"))
			if lost(err) || errors.Is(err, worklease.ErrLeaseRevoked) {
				return nil
			}
			if err != nil {
				return err
			}
			switch res.Status {
			case worklease.RetryScheduled:
				continue
			case worklease.GiveUpNextAcquired:
				offset, tok = res.Lease.Offset, res.Lease.Token
				continue
			}
			return nil
		}
		// The success is recorded before the call, and confirmed after it: a
		// process killed in between leaves it unconfirmed.
		if _, err := pool.Exec(ctx, "INSERT INTO "+s+".succeeded VALUES ($1, $2, $3, $4, false)", domain, offset, int64(tok.Fence()), os.Getpid()); err != nil {
			return err
		}
		res, err := m.SucceedNext(ctx, domain, tok)
		if err := confirmSuccess(ctx, pool, s, domain, offset, int64(tok.Fence()), err == nil, stale); err != nil {
			return err
		}
		if lost(err) || errors.Is(err, worklease.ErrLeaseRevoked) {
			return nil // the lease expired while stalled: another holder has the offset
		}
		if err != nil {
			return err
		}
		if res.Status != worklease.NextAcquired {
			return nil
		}
		offset, tok = res.Lease.Offset, res.Lease.Token
	}
}

// confirmSuccess settles the success of offset of domain under fence,
// recorded before its Succeed: it stands if the call was accepted, and
// goes otherwise. A write that a later holder's fence refused (stale) is
// recorded, with whether its Succeed was accepted nonetheless.
func confirmSuccess(ctx context.Context, pool *pgxpool.Pool, s, domain string, offset, fence int64, accepted, stale bool) error {
	confirm := "UPDATE " + s + ".succeeded SET ok = true WHERE domain = $1 AND fence = $2"
	if !accepted {
		confirm = "DELETE FROM " + s + ".succeeded WHERE domain = $1 AND fence = $2"
	}
	if _, err := pool.Exec(ctx, confirm, domain, fence); err != nil {
		return err
	}
	if stale {
		_, err := pool.Exec(ctx, "INSERT INTO "+s+".stale VALUES ($1, $2, $3, $4)", domain, offset, fence, accepted)
		return err
	}
	return nil
}

// drain works domain's backlog until it is empty and idle.
func drain(t *testing.T, ctx context.Context, m *pg.Manager, pool *pgxpool.Pool, s, domain string) {
	for {
		info, err := m.Inspect(ctx, domain)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case info.Leased:
			t.Fatalf("%s: a lease is still held: %+v", domain, info.Lease)
		case len(info.Backlog) == 0:
			return
		}
		res, err := m.TryAcquire(ctx, domain, info.Backlog[0])
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != worklease.Acquired {
			t.Fatalf("%s: TryAcquire of the head %d: %v", domain, info.Backlog[0], res.Status)
		}
		if err := workOffsets(ctx, m, pool, s, domain, info.Backlog[0], res.Token, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// checkHistory checks what the workers recorded: every offset of every
// domain succeeded exactly once, in order, each under a larger fence than
// the one before; and no stale holder's Succeed was accepted.
func checkHistory(t *testing.T, pool *pgxpool.Pool, s string) {
	ctx := context.Background()
	// A domain's grants are in the order of their fences, and one at a
	// time: so are its successes.
	rows, err := pool.Query(ctx, "SELECT domain, off, fence, ok FROM "+s+".succeeded ORDER BY domain, fence")
	if err != nil {
		t.Fatal(err)
	}
	last := make(map[string][2]int64) // per domain, the last offset and fence
	count := 0
	for rows.Next() {
		var domain string
		var off, fence int64
		var ok bool
		if err := rows.Scan(&domain, &off, &fence, &ok); err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("%s: the success of offset %d under fence %d was never confirmed", domain, off, fence)
			continue
		}
		prev, seen := last[domain]
		want := int64(0)
		if seen {
			want = prev[0] + 1
		}
		if off != want {
			t.Errorf("%s: offset %d succeeded after %v; want %d (in order, each once)", domain, off, prev, want)
		}
		if seen && fence <= prev[1] {
			t.Errorf("%s: offset %d succeeded under fence %d after fence %d", domain, off, fence, prev[1])
		}
		last[domain] = [2]int64{off, fence}
		count++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for d := range mpDomains {
		if got := last[domainName(d)]; got[0] != mpOffsets-1 {
			t.Errorf("%s: last offset succeeded %d, want %d", domainName(d), got[0], mpOffsets-1)
		}
	}
	var stale, accepted int
	if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE accepted) FROM "+s+".stale").Scan(&stale, &accepted); err != nil {
		t.Fatal(err)
	}
	if accepted > 0 {
		t.Errorf("%d of %d stale holders had their Succeed accepted", accepted, stale)
	}
	t.Logf("%d offsets succeeded; %d stale holders refused", count, stale)
}

// The number of racers in TestOneWinner.
const (
	racerProcesses  = 4
	racerGoroutines = 25 // in each: 100 in all
	raceRounds      = 20
)

// A hundred consumers, 100 goroutines over several processes, race for one
// offset, round after round; exactly one wins each time.
func TestOneWinner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	pool := testPool(t)
	schema := newSchemaName()
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	ctx := context.Background()
	if _, err := pg.OpenSchema(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+s+".wins (round int NOT NULL, process int NOT NULL, status text NOT NULL);"+
		"CREATE TABLE "+s+".start (at timestamptz NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	// Every racer starts each round at the same moments.
	if _, err := pool.Exec(ctx, "INSERT INTO "+s+".start VALUES (clock_timestamp() + interval '1 second')"); err != nil {
		t.Fatal(err)
	}
	for i, c := range startChildren(t, "race", schema, racerProcesses) {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	rows, err := pool.Query(ctx, "SELECT round, count(*) FILTER (WHERE status = 'Acquired'), count(*) FROM "+s+".wins GROUP BY round ORDER BY round")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	rounds := 0
	for rows.Next() {
		var round, won, all int
		if err := rows.Scan(&round, &won, &all); err != nil {
			t.Fatal(err)
		}
		if won != 1 || all != racerProcesses*racerGoroutines {
			t.Errorf("round %d: %d of %d racers acquired the offset, want 1 of %d", round, won, all, racerProcesses*racerGoroutines)
		}
		rounds++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if rounds != raceRounds {
		t.Errorf("%d rounds recorded, want %d", rounds, raceRounds)
	}
}

// childRace is one process of TestOneWinner.
func childRace(t *testing.T, pool *pgxpool.Pool, schema string, index int) {
	ctx := context.Background()
	cfg := pool.Config()
	cfg.MaxConns = racerGoroutines
	racePool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer racePool.Close()
	m, err := pg.OpenSchema(ctx, racePool, schema)
	if err != nil {
		t.Fatal(err)
	}
	s := pgx.Identifier{schema}.Sanitize()
	var start time.Time
	if err := pool.QueryRow(ctx, "SELECT at FROM "+s+".start").Scan(&start); err != nil {
		t.Fatal(err)
	}
	// Open every connection before the first round.
	var conns []*pgxpool.Conn
	for range racerGoroutines {
		c, err := racePool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	var statuses []string
	var mu sync.Mutex
	for round := range raceRounds {
		time.Sleep(time.Until(start.Add(time.Duration(round) * 200 * time.Millisecond)))
		var wg sync.WaitGroup
		for range racerGoroutines {
			wg.Go(func() {
				res, err := m.TryAcquire(ctx, "contended-"+strconv.Itoa(round), 7)
				status := res.Status.String()
				if err != nil {
					status = "error: " + err.Error()
				}
				mu.Lock()
				statuses = append(statuses, fmt.Sprintf("(%d, %d, %s)", round, index, pgQuote(status)))
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+s+".wins VALUES "+strings.Join(statuses, ", ")); err != nil {
		t.Fatal(err)
	}
}

// pgQuote quotes s as an SQL string literal.
func pgQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
