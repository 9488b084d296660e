package pg_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// The pull queue shared by processes: a producer enqueues every domain's
// offsets in order, with payloads, while worker processes claim ready
// domains' heads, end some in batches with SucceedMany or ClaimNext (and
// work what that leases them next), fail some attempts (which wait out a
// short delay before any worker claims them again), stall past their lease's TTL on others,
// and one process is killed with SIGKILL while it holds leases. Afterwards,
// with the work finished by claims alone (no Reap): every domain's offsets
// succeeded in order, each exactly once, each claim carried its offset's
// payload, no stale holder's Succeed was accepted, the killed process's
// leases were taken over, and no payload is left.
func TestManyProcessesPull(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes for seconds")
	}
	pool := testPool(t)
	ctx := context.Background()
	m, schema := newManager(t, pool, worklease.WithLeaseTTL(mpTTL), worklease.WithMaxRetries(mpRetries))
	s := createHistory(t, pool, schema)

	// The producer offers the domains' offsets in order, the domains
	// interleaved at random, while the workers run.
	produced := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		next := make([]int64, mpDomains)
		for left := mpDomains * mpOffsets; left > 0; {
			d := rng.IntN(mpDomains)
			if next[d] == mpOffsets {
				continue
			}
			st, err := m.Enqueue(ctx, domainName(d), next[d], pullPayload(domainName(d), next[d]))
			if err == nil && st != worklease.Enqueued {
				err = fmt.Errorf("Enqueue(%s, %d): %v", domainName(d), next[d], st)
			}
			if err != nil {
				produced <- err
				return
			}
			next[d]++
			left--
			if left%8 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		produced <- nil
	}()

	cmds := startChildren(t, "pull", schema, mpProcesses)
	killWorking(t, pool, s, cmds[0])
	for i, c := range cmds {
		if err := c.Wait(); i > 0 && err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	// Finish what is left by claims alone, as a process that starts
	// afterwards would: the killed process's leases come back once due.
	// On a loaded machine the children may leave much of the work: the
	// test gives up only after 30 s without progress.
	deadline := time.Now().Add(30 * time.Second)
	least := -1 // the fewest offsets queued so far
	for {
		var queued int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+quoted(schema)+".backlog").Scan(&queued); err != nil {
			t.Fatal(err)
		}
		if least < 0 || queued < least {
			least, deadline = queued, time.Now().Add(30*time.Second)
		}
		leases, err := m.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		claims, err := m.Claim(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(claims) == 0 && len(leases) == 0 && queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the work is not finished: %d offsets queued, %d leases held; domains with offsets queued: %s",
				queued, len(leases), queuedDomains(t, pool, schema))
		}
		for _, c := range claims {
			if err := workClaim(ctx, m, pool, s, c, "succeed"); err != nil {
				t.Fatal(err)
			}
		}
		if len(claims) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	settled := settleKilled(t, pool, s, cmds[0].Process.Pid)
	checkHistory(t, pool, s)
	checkTakenOver(t, pool, s, cmds[0].Process.Pid, settled)
	var payloads int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+quoted(schema)+".payloads").Scan(&payloads); err != nil {
		t.Fatal(err)
	}
	if payloads != 0 {
		t.Errorf("%d payloads left after every offset succeeded", payloads)
	}
}

// pullPayload is what the producer stores with an offset.
func pullPayload(domain string, offset int64) []byte {
	return fmt.Appendf(nil, "%s/%d", domain, offset)
}

// childPull is one worker process of TestManyProcessesPull: its workers
// claim a few ready domains at a time and work each claim.
func childPull(t *testing.T, pool *pgxpool.Pool, schema string, index int) {
	deadline := time.Now().Add(mpRun)
	ctx := context.Background()
	m, err := pg.OpenSchema(ctx, pool, schema, worklease.WithLeaseTTL(mpTTL), worklease.WithMaxRetries(mpRetries))
	if err != nil {
		t.Fatal(err)
	}
	s := quoted(schema)
	var wg sync.WaitGroup
	for g := range mpGoroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(index), uint64(g)))
			var next []worklease.Claim // what the last batch's ClaimNext leased
			for time.Now().Before(deadline) {
				claims := next
				if len(claims) == 0 {
					var err error
					if claims, err = m.Claim(ctx, 1+rng.IntN(3)); err != nil {
						t.Errorf("process %d: %v", index, err)
						return
					}
				}
				if len(claims) == 0 {
					time.Sleep(time.Duration(1+rng.IntN(3)) * time.Millisecond)
				}
				// Claims that will succeed at once go in one SucceedMany, or
				// ClaimNext, half the time; the others are worked one by one.
				var batch []worklease.Claim
				for _, c := range claims {
					how := "succeed"
					switch r := rng.IntN(100); {
					case r < 10:
						how = "fail"
					case r < 14:
						how = "stall"
					}
					if how == "succeed" && rng.IntN(2) == 0 {
						batch = append(batch, c)
						continue
					}
					if err := workClaim(ctx, m, pool, s, c, how); err != nil {
						t.Errorf("process %d: %v", index, err)
						return
					}
				}
				var err error
				if next, err = workBatch(ctx, m, pool, s, batch, rng.IntN(2) == 0); err != nil {
					t.Errorf("process %d: %v", index, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// workClaim works one claim: it records the attempt, writes through the
// claim's fence, and ends the attempt as how says: "succeed", "fail"
// (Retry after a short delay), or "stall" (past the lease's TTL, then
// succeed: a later holder may have the offset by then).
func workClaim(ctx context.Context, m *pg.Manager, pool *pgxpool.Pool, s string, c worklease.Claim, how string) error {
	if want := pullPayload(c.Domain, c.Offset); string(c.Payload) != string(want) {
		return fmt.Errorf("claim of %s/%d carried payload %q; want %q", c.Domain, c.Offset, c.Payload, want)
	}
	fence := int64(c.Token.Fence())
	if _, err := pool.Exec(ctx, "INSERT INTO "+s+".attempts VALUES ($1, $2, $3, $4)", c.Domain, c.Offset, fence, os.Getpid()); err != nil {
		return err
	}
	time.Sleep(mpWork)
	if how == "stall" {
		time.Sleep(mpTTL + mpTTL/2)
	}
	tag, err := pool.Exec(ctx, "INSERT INTO "+s+".fences AS f (domain, fence) VALUES ($1, $2) "+
		"ON CONFLICT (domain) DO UPDATE SET fence = $2 WHERE f.fence <= $2", c.Domain, fence)
	if err != nil {
		return err
	}
	stale := tag.RowsAffected() == 0
	if how == "fail" {
		_, err := m.Retry(ctx, c.Domain, c.Token, errors.New("boom"), 5*time.Millisecond)
		if lost(err) {
			return nil
		}
		return err
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+s+".succeeded VALUES ($1, $2, $3, $4, false)", c.Domain, c.Offset, fence, os.Getpid()); err != nil {
		return err
	}
	_, err = m.Succeed(ctx, c.Domain, c.Token)
	if err := confirmSuccess(ctx, pool, s, c.Domain, c.Offset, fence, err == nil, stale); err != nil {
		return err
	}
	if lost(err) {
		return nil // the lease expired while stalled: another holder has the offset
	}
	return err
}

// workBatch works claims as workClaim works each with "succeed", ending
// them with one SucceedMany, or with one ClaimNext if next is set, and
// returns the leases that granted.
func workBatch(ctx context.Context, m *pg.Manager, pool *pgxpool.Pool, s string, claims []worklease.Claim, next bool) ([]worklease.Claim, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	stale := make([]bool, len(claims))
	for i, c := range claims {
		if want := pullPayload(c.Domain, c.Offset); string(c.Payload) != string(want) {
			return nil, fmt.Errorf("claim of %s/%d carried payload %q; want %q", c.Domain, c.Offset, c.Payload, want)
		}
		fence := int64(c.Token.Fence())
		if _, err := pool.Exec(ctx, "INSERT INTO "+s+".attempts VALUES ($1, $2, $3, $4)", c.Domain, c.Offset, fence, os.Getpid()); err != nil {
			return nil, err
		}
		tag, err := pool.Exec(ctx, "INSERT INTO "+s+".fences AS f (domain, fence) VALUES ($1, $2) "+
			"ON CONFLICT (domain) DO UPDATE SET fence = $2 WHERE f.fence <= $2", c.Domain, fence)
		if err != nil {
			return nil, err
		}
		stale[i] = tag.RowsAffected() == 0
		if _, err := pool.Exec(ctx, "INSERT INTO "+s+".succeeded VALUES ($1, $2, $3, $4, false)", c.Domain, c.Offset, fence, os.Getpid()); err != nil {
			return nil, err
		}
	}
	time.Sleep(mpWork)
	var granted []worklease.Claim
	var errs []error
	var err error
	if next {
		granted, errs, err = m.ClaimNext(ctx, claims)
	} else {
		errs, err = m.SucceedMany(ctx, claims)
	}
	if err != nil {
		return nil, err
	}
	for i, c := range claims {
		if err := confirmSuccess(ctx, pool, s, c.Domain, c.Offset, int64(c.Token.Fence()), errs[i] == nil, stale[i]); err != nil {
			return nil, err
		}
		if errs[i] != nil && !lost(errs[i]) {
			return nil, errs[i]
		}
	}
	return granted, nil
}

// lost reports whether err says that the caller's lease is gone: it
// expired and was taken over, by now maybe by several holders in turn, so
// that the token is the latest revoked one (ErrLeaseExpired), or an older
// one (ErrTokenMismatch while another lease is held, ErrNoLease when none
// is).
func lost(err error) bool {
	return errors.Is(err, worklease.ErrLeaseExpired) || errors.Is(err, worklease.ErrTokenMismatch) ||
		errors.Is(err, worklease.ErrNoLease)
}

// quoted returns schema's quoted name.
func quoted(schema string) string { return pgx.Identifier{schema}.Sanitize() }

// queuedDomains describes a few of the domains that have offsets queued,
// for a test that failed.
func queuedDomains(t *testing.T, pool *pgxpool.Pool, schema string) string {
	rows, err := pool.Query(context.Background(), "SELECT convert_from(domain, 'UTF8'), queued, lease_off, paused, ready_at, "+
		"fence, streak, streak_fence FROM "+quoted(schema)+".domains WHERE queued > 0 ORDER BY domain LIMIT 5")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		var queued int
		var leaseOff *int64
		var paused bool
		var readyAt *time.Time
		var fence, streak, streakFence int64
		if err := rows.Scan(&d, &queued, &leaseOff, &paused, &readyAt, &fence, &streak, &streakFence); err != nil {
			return err.Error()
		}
		lease := "none"
		if leaseOff != nil {
			lease = fmt.Sprint(*leaseOff)
		}
		out = append(out, fmt.Sprintf("%s: queued %d, lease %s, paused %t, ready at %v, fence %d, streak %d at %d",
			d, queued, lease, paused, readyAt, fence, streak, streakFence))
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	return fmt.Sprint(out)
}
