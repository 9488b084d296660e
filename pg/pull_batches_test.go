package pg_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// Tests of the pull queue's batch calls (EnqueueMany, SucceedMany,
// ClaimNext): against the same calls made one at a time, and against the
// calls of other processes that change a domain meanwhile.

// EnqueueMany answers and stores a batch as Enqueue does item by item, in
// every state a domain can be in (queued, leased, due, processed, failed,
// paused, forgotten, retried), with either ordering and with monotonic
// offsets: a schema that takes each batch through EnqueueMany and a twin
// that takes it through Enqueue, item by item, given the same calls and
// the same clock, answer alike and end up alike, and claims lease the same
// offsets with the same payloads and attempts.
func TestEnqueueManyMatchesEnqueue(t *testing.T) {
	for _, cfg := range []struct {
		name string
		opts []worklease.Option
	}{
		{"fifo", nil},
		{"lifo", []worklease.Option{worklease.WithOrdering(worklease.LIFO)}},
		{"monotonic", []worklease.Option{worklease.WithMonotonicOffsets()}},
		{"lifo-monotonic", []worklease.Option{worklease.WithOrdering(worklease.LIFO), worklease.WithMonotonicOffsets()}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			opts := append([]worklease.Option{worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(1)}, cfg.opts...)
			batched, single := newPullEnv(t, opts...), newPullEnv(t, opts...)
			seed := uint64(11)
			if v := os.Getenv("WORKLEASE_SEED"); v != "" {
				fmt.Sscan(v, &seed)
			}
			rng := rand.New(rand.NewPCG(seed, uint64(len(cfg.name))))
			domains := []string{"a", "b", "c"}
			held := map[string][2]worklease.Claim{} // each domain's lease, in both schemas
			for round := range 60 {
				// A few calls that change the domains, alike in both.
				for range 1 + rng.IntN(4) {
					d := domains[rng.IntN(len(domains))]
					off, op := rng.Int64N(8), rng.IntN(100)
					delay := time.Duration(rng.IntN(2)) * time.Second
					advance := time.Duration(rng.IntN(90)) * time.Second
					var r [2]string
					for i, e := range []*pullEnv{batched, single} {
						switch {
						case op < 30:
							st, err := e.m.Enqueue(e.ctx, d, off, fmt.Appendf(nil, "%s%d-%d", d, off, round))
							r[i] = fmt.Sprint(st, err)
						case op < 50:
							// All that are ready: a batch makes domains ready at
							// the same time, which claims take in any order.
							cs, err := e.m.Claim(e.ctx, len(domains))
							got := claimStrings(cs)
							slices.Sort(got)
							r[i] = fmt.Sprint(got, err)
							for _, c := range cs {
								h := held[c.Domain]
								h[i] = c
								held[c.Domain] = h
							}
						case op < 65:
							if c := held[d][i]; c.Domain != "" {
								_, err := e.m.Succeed(e.ctx, d, c.Token)
								r[i] = fmt.Sprint(err != nil)
							}
						case op < 72:
							if c := held[d][i]; c.Domain != "" {
								res, err := e.m.Retry(e.ctx, d, c.Token, errors.New("x"), delay)
								r[i] = fmt.Sprint(res, err != nil)
							}
						case op < 78:
							_, err := e.m.Kill(e.ctx, d, off, "k")
							r[i] = fmt.Sprint(err != nil)
						case op < 82:
							_, err := e.m.Redrive(e.ctx, d, off)
							r[i] = fmt.Sprint(err != nil)
						case op < 86:
							r[i] = fmt.Sprint(e.m.Forget(e.ctx, d) != nil)
						case op < 90:
							r[i] = fmt.Sprint(e.m.Pause(e.ctx, d) != nil)
						case op < 94:
							_, err := e.m.Resume(e.ctx, d)
							r[i] = fmt.Sprint(err != nil)
						default:
							e.clock.Advance(advance)
						}
					}
					if r[0] != r[1] {
						t.Fatalf("round %d: call %d on %s/%d: %s in one schema and %s in its twin", round, op, d, off, r[0], r[1])
					}
				}
				// The same batch, through EnqueueMany and through Enqueue.
				var items []pg.Item
				for range 1 + rng.IntN(6) {
					d := domains[rng.IntN(len(domains))]
					off := rng.Int64N(8)
					var payload []byte
					if rng.IntN(3) > 0 {
						payload = fmt.Appendf(nil, "%s%d-b%d", d, off, round)
					}
					items = append(items, pg.Item{Domain: d, Offset: off, Payload: payload})
				}
				got, err := batched.m.EnqueueMany(batched.ctx, items)
				// Item by item in a transaction, rolled back if an item's
				// payload is not the one its offset holds: then the batch
				// is refused and stores nothing.
				tx, terr := single.pool.Begin(single.ctx)
				if terr != nil {
					t.Fatal(terr)
				}
				var want []worklease.AcquireStatus
				var mismatch bool
				for _, it := range items {
					st, err := single.m.EnqueueTx(single.ctx, tx, it.Domain, it.Offset, it.Payload)
					if errors.Is(err, worklease.ErrPayloadMismatch) {
						mismatch = true
						break
					}
					if err != nil {
						t.Fatalf("round %d: Enqueue(%s, %d): %v", round, it.Domain, it.Offset, err)
					}
					want = append(want, st)
				}
				if mismatch {
					terr = tx.Rollback(single.ctx)
				} else {
					terr = tx.Commit(single.ctx)
				}
				if terr != nil {
					t.Fatal(terr)
				}
				switch {
				case mismatch && !errors.Is(err, worklease.ErrPayloadMismatch):
					t.Fatalf("round %d: EnqueueMany(%v) = %v, %v; want ErrPayloadMismatch", round, itemStrings(items), got, err)
				case !mismatch && err != nil:
					t.Fatalf("round %d: EnqueueMany(%v): %v", round, items, err)
				case !mismatch && !slices.Equal(got, want):
					t.Fatalf("round %d: EnqueueMany(%v) = %v; Enqueue item by item = %v", round, itemStrings(items), got, want)
				}
				for _, d := range domains {
					bi, err1 := batched.m.Inspect(batched.ctx, d)
					si, err2 := single.m.Inspect(single.ctx, d)
					if err1 != nil || err2 != nil {
						t.Fatal(err1, err2)
					}
					if b, s := infoString(bi), infoString(si); b != s {
						t.Fatalf("round %d, after EnqueueMany(%v): domain %s is %s; after Enqueue item by item, %s", round, itemStrings(items), d, b, s)
					}
				}
				if b, s := tableString(batched, "payloads"), tableString(single, "payloads"); b != s {
					t.Fatalf("round %d, after EnqueueMany(%v): payloads %s; after Enqueue item by item, %s", round, itemStrings(items), b, s)
				}
			}
		})
	}
}

func claimStrings(cs []worklease.Claim) []string {
	var s []string
	for _, c := range cs {
		s = append(s, fmt.Sprintf("%s/%d:%s@%d", c.Domain, c.Offset, c.Payload, c.Attempt))
	}
	return s
}

func itemStrings(items []pg.Item) []string {
	var s []string
	for _, it := range items {
		s = append(s, fmt.Sprintf("%s/%d:%s", it.Domain, it.Offset, it.Payload))
	}
	return s
}

func infoString(i worklease.DomainInfo) string {
	return fmt.Sprintf("leased=%v(off %d, retries %d) paused=%v backlog=%v processed=%d failed=%d",
		i.Leased, i.Lease.Offset, i.Lease.RetryCount, i.Paused, i.Backlog, i.Processed, i.Failed)
}

// tableString returns a table's (domain, off, ...) rows, in order.
func tableString(e *pullEnv, table string) string {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, "SELECT domain, off, payload FROM "+quoted(e.schema)+"."+table+" ORDER BY domain, off")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var s []string
	for rows.Next() {
		var d, p []byte
		var off int64
		if err := rows.Scan(&d, &off, &p); err != nil {
			e.t.Fatal(err)
		}
		s = append(s, fmt.Sprintf("%s/%d:%s", d, off, p))
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return fmt.Sprint(s)
}

// holdDomain locks domain's row in a transaction of its own, as a call of
// another process would, and returns it; the caller ends it.
func (e *pullEnv) holdDomain(domain string) pgx.Tx {
	e.t.Helper()
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := tx.Exec(e.ctx, "SELECT FROM "+quoted(e.schema)+".domains WHERE domain = $1 FOR UPDATE", []byte(domain)); err != nil {
		e.t.Fatal(err)
	}
	return tx
}

// waitForLockWaiters waits until n statements on the schema wait for a lock.
func (e *pullEnv) waitForLockWaiters(n int) {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := e.pool.QueryRow(e.ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0",
			e.schema).Scan(&waiting); err != nil {
			e.t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d statements wait for a lock; want %d", waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// claimNextMeanwhile runs ClaimNext of cs while another process's
// transaction holds domain's row: once ClaimNext waits for the row, change
// runs in that transaction, which then commits. It returns ClaimNext's
// answer, failing the test on an error.
func (e *pullEnv) claimNextMeanwhile(cs []worklease.Claim, domain string, change func(tx pgx.Tx)) []worklease.Claim {
	e.t.Helper()
	tx := e.holdDomain(domain)
	type result struct {
		next []worklease.Claim
		errs []error
		err  error
	}
	done := make(chan result, 1)
	go func() {
		next, errs, err := e.m.ClaimNext(e.ctx, cs)
		done <- result{next, errs, err}
	}()
	e.waitForLockWaiters(1)
	change(tx)
	if err := tx.Commit(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		e.t.Fatalf("ClaimNext: %v", r.err)
	}
	for i, err := range r.errs {
		if err != nil {
			e.t.Fatalf("ClaimNext of %s/%d: %v", cs[i].Domain, cs[i].Offset, err)
		}
	}
	return r.next
}

// exec runs sql in tx, failing the test on an error.
func (e *pullEnv) exec(tx pgx.Tx, sql string, args ...any) {
	e.t.Helper()
	if _, err := tx.Exec(e.ctx, sql, args...); err != nil {
		e.t.Fatal(err)
	}
}

// policy is the SQL of the schema's policy row with these options' values.
func (e *pullEnv) policy(maxRetries int, lifo bool) string {
	return fmt.Sprintf("ROW(%d, NULL, %v, false, false, false)::%s.policy", maxRetries, lifo, quoted(e.schema))
}

// A ClaimNext whose statement began before another call changed the
// domain (here a Kill of its next offset, committed while ClaimNext waited
// for the domain's row) does not grant what its snapshot saw as the next
// offset: it ends the lease, and the domain's head is left to Claim.
func TestClaimNextAfterConcurrentKill(t *testing.T) {
	e := newPullEnv(t)
	for i := 1; i <= 3; i++ {
		e.enqueue("a", int64(i), fmt.Sprintf("a%d", i), worklease.Enqueued)
	}
	cs, _ := e.claim(1)
	// Another process kills offset 2, the next one, in the transaction
	// that holds the row.
	next := e.claimNextMeanwhile(cs, "a", func(tx pgx.Tx) {
		e.exec(tx, "SELECT "+quoted(e.schema)+".kill($1, 2, NULL, true, $2, "+e.policy(5, false)+")", []byte("a"), e.clock.Now())
	})
	for _, c := range next {
		if c.Offset == 2 {
			t.Fatalf("ClaimNext granted offset 2, which was killed before it locked the domain: %+v", c)
		}
	}
	if len(next) == 0 {
		if _, got := e.claim(1); !equal(got, []string{"a/3:a3@1"}) {
			t.Fatalf("claim after ClaimNext: %v; want a/3", got)
		}
	}
	if letters, err := e.m.DeadLetters(e.ctx, "a"); err != nil || len(letters) != 1 || letters[0].Offset != 2 {
		t.Fatalf("DeadLetters: %+v, %v; want offset 2", letters, err)
	}
}

// A SucceedMany that waited for a domain whose lease another call revoked
// meanwhile (a Kill of the offset in flight) does not end it: the holder
// hears that the lease was revoked, and the offset stays a dead letter.
func TestSucceedManyAfterConcurrentKill(t *testing.T) {
	e := newPullEnv(t)
	e.enqueue("a", 1, "a1", worklease.Enqueued)
	e.enqueue("b", 1, "b1", worklease.Enqueued)
	cs, _ := e.claim(2)
	tx := e.holdDomain("a")
	type result struct {
		errs []error
		err  error
	}
	done := make(chan result, 1)
	go func() {
		errs, err := e.m.SucceedMany(e.ctx, cs)
		done <- result{errs, err}
	}()
	e.waitForLockWaiters(1)
	if _, err := tx.Exec(e.ctx, "SELECT "+quoted(e.schema)+".kill($1, 1, NULL, true, $2, "+e.policy(5, false)+")",
		[]byte("a"), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	for i, c := range cs {
		want := error(nil)
		if c.Domain == "a" {
			want = worklease.ErrLeaseRevoked
		}
		if !errors.Is(r.errs[i], want) || (want == nil) != (r.errs[i] == nil) {
			t.Errorf("SucceedMany of %s/%d: %v; want %v", c.Domain, c.Offset, r.errs[i], want)
		}
	}
	if letters, err := e.m.DeadLetters(e.ctx, "a"); err != nil || len(letters) != 1 {
		t.Fatalf("DeadLetters of a: %+v, %v; want offset 1", letters, err)
	}
	if n := e.count("payloads"); n != 1 {
		t.Fatalf("%d payloads; want 1, the dead letter's", n)
	}
}

// A ClaimNext that waited for a domain into which another process enqueued
// with LIFO ordering (a new head) meanwhile does not grant the head its
// snapshot saw, which is no longer the head.
func TestClaimNextAfterConcurrentLIFOEnqueue(t *testing.T) {
	e := newPullEnv(t, worklease.WithOrdering(worklease.LIFO))
	e.enqueue("a", 1, "a1", worklease.Enqueued)
	cs, _ := e.claim(1)
	e.enqueue("a", 2, "a2", worklease.Enqueued)
	next := e.claimNextMeanwhile(cs, "a", func(tx pgx.Tx) {
		e.exec(tx, "SELECT "+quoted(e.schema)+".enqueue($1, 3, $2, $3, "+e.policy(5, true)+")", []byte("a"), []byte("a3"), e.clock.Now())
	})
	var got []string
	for _, c := range next {
		got = append(got, fmt.Sprintf("%s/%d", c.Domain, c.Offset))
	}
	_, claimed := e.claim(5)
	if len(got) != 0 && !equal(got, []string{"a/3"}) {
		t.Fatalf("ClaimNext granted %v; want the head, a/3, or nothing", got)
	}
	if len(got) == 0 && !equal(claimed, []string{"a/3:a3@1"}) {
		t.Fatalf("claim after ClaimNext: %v; want the head, a/3", claimed)
	}
}

// A ClaimNext that waited for a domain into which another process stored
// offsets at the back of its backlog meanwhile (a producer storing while
// the domain's job runs) still grants the head its snapshot saw, which is
// still the head, and leaves the new offsets queued behind it. If that
// process also took an offset out (here a Kill of the head, with as many
// offsets stored as taken out), the snapshot's head is not granted.
func TestClaimNextAfterConcurrentAppend(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			e := newPullEnv(t)
			for i := 1; i <= 2; i++ {
				e.enqueue("a", int64(i), fmt.Sprintf("a%d", i), worklease.Enqueued)
			}
			cs, _ := e.claim(1)
			next := e.claimNextMeanwhile(cs, "a", func(tx pgx.Tx) {
				for _, off := range []int64{3, 4} {
					e.exec(tx, "SELECT "+quoted(e.schema)+".enqueue($1, $2, $3, $4, "+e.policy(5, false)+")",
						[]byte("a"), off, []byte(fmt.Sprintf("a%d", off)), e.clock.Now())
				}
				if kill {
					e.exec(tx, "SELECT "+quoted(e.schema)+".kill($1, 2, NULL, true, $2, "+e.policy(5, false)+")", []byte("a"), e.clock.Now())
				}
			})
			if kill {
				if len(next) != 0 {
					t.Fatalf("ClaimNext granted %v; want nothing: the head its snapshot saw, a/2, was killed", claimStrings(next))
				}
				if _, claimed := e.claim(5); !equal(claimed, []string{"a/3:a3@1"}) {
					t.Fatalf("claim after ClaimNext: %v; want a/3, the head", claimed)
				}
				return
			}
			// The head before and after the offsets stored behind it, then
			// those offsets, in order.
			for _, want := range []string{"a/2:a2@1", "a/3:a3@1", "a/4:a4@1"} {
				if got := claimStrings(next); !equal(got, []string{want}) {
					t.Fatalf("ClaimNext granted %v; want %s", got, want)
				}
				var errs []error
				var err error
				if next, errs, err = e.m.ClaimNext(e.ctx, next); err != nil || errs[0] != nil {
					t.Fatalf("ClaimNext: %v, %v", errs, err)
				}
			}
		})
	}
}

// EnqueueMany that makes a domain ready wakes a waiting claim of another
// process, as Enqueue does, long before its poll.
func TestWaitClaimAfterEnqueueMany(t *testing.T) {
	e := newPullEnv(t)
	defer e.m.Close()
	pg.WaitOnNotifications(e.m)
	producer, err := pg.OpenSchema(e.ctx, testPool(t), e.schema, worklease.WithClock(e.clock)) // another process
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	done := make(chan []worklease.Claim, 1)
	go func() {
		got, _ := e.m.WaitClaim(e.ctx, 1, time.Minute)
		done <- got
	}()
	time.Sleep(200 * time.Millisecond) // the claim is waiting by now
	if _, err := producer.EnqueueMany(e.ctx, []pg.Item{{Domain: "a", Offset: 1, Payload: []byte("a1")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if len(got) != 1 || got[0].Domain != "a" {
			t.Fatalf("WaitClaim after EnqueueMany: %+v; want a/1", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("EnqueueMany made a domain ready, and no waiting claim woke within 10s (its poll is a minute)")
	}
}

// MaxStreak counts ClaimNext's leases since the domain was last claimed:
// a domain claimed while a lease elsewhere is due (Claim's other path)
// starts a new streak too.
func TestClaimNextStreakAfterClaimTakesOver(t *testing.T) {
	e := newPullEnv(t, worklease.WithLeaseTTL(time.Hour))
	for i := range 2*pg.MaxStreak + 2 {
		e.enqueue("deep", int64(i), "", worklease.Enqueued)
	}
	e.clock.Advance(time.Millisecond)
	e.enqueue("other", 1, "", worklease.Enqueued)
	cs, got := e.claim(2)
	if !equal(got, []string{"deep/0:@1", "other/1:@1"}) {
		t.Fatalf("first claim: %v", got)
	}
	cs = cs[:1]
	// Half a streak, then a plain Succeed.
	for range pg.MaxStreak / 2 {
		next, errs, err := e.m.ClaimNext(e.ctx, cs)
		if err != nil || errs[0] != nil || len(next) != 1 {
			t.Fatalf("ClaimNext: %v, %v, %v", next, errs, err)
		}
		cs = next
	}
	if _, err := e.m.Succeed(e.ctx, "deep", cs[0].Token); err != nil {
		t.Fatal(err)
	}
	// other's lease becomes due: the next Claim takes it over first, in the
	// schema's claim function, and claims deep, which waited longest.
	e.clock.Advance(time.Hour)
	cs, got = e.claim(1)
	if len(cs) != 1 || cs[0].Domain != "deep" {
		t.Fatalf("claim after other's lease expired: %v; want deep's next offset", got)
	}
	n := 0
	for {
		next, errs, err := e.m.ClaimNext(e.ctx, cs)
		if err != nil || errs[0] != nil {
			t.Fatalf("ClaimNext: %v, %v", errs, err)
		}
		if len(next) == 0 {
			break
		}
		n++
		cs = next
	}
	if n != pg.MaxStreak {
		t.Fatalf("ClaimNext leased deep %d times in a row after Claim claimed it; want MaxStreak, %d", n, pg.MaxStreak)
	}
}

// EnqueueMany with LIFO ordering gives a domain a head that is not
// scheduled: a domain that waited for its old head's schedule is ready at
// once, or when its retry's delay ends, as Enqueue makes it.
func TestEnqueueManyLIFOReplacesScheduledHead(t *testing.T) {
	e := newPullEnv(t, worklease.WithOrdering(worklease.LIFO), worklease.WithMaxRetries(3))
	defer e.m.Close()
	later := e.clock.Now().Add(time.Hour)
	e.enqueue("b", 1, "b1", worklease.Enqueued)
	claimed, err := e.m.Claim(e.ctx, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim: %v, %v; want b/1", claimed, err)
	}
	if _, err := e.m.Retry(e.ctx, "b", claimed[0].Token, nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "b"} {
		if st, err := e.m.EnqueueAt(e.ctx, d, 2, nil, later); err != nil || st != worklease.Enqueued {
			t.Fatalf("EnqueueAt(%s, 2): %v, %v", d, st, err)
		}
	}
	if _, err := e.m.EnqueueMany(e.ctx, []pg.Item{{Domain: "a", Offset: 3}, {Domain: "b", Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a/3", "", "b/3"} {
		claimed, err := e.m.Claim(e.ctx, 5)
		var got []string
		for _, c := range claimed {
			got = append(got, fmt.Sprintf("%s/%d", c.Domain, c.Offset))
		}
		if err != nil || strings.Join(got, " ") != want {
			t.Fatalf("Claim at %v: %v, %v; want %q", e.clock.Now(), got, err, want)
		}
		e.clock.Advance(5 * time.Second)
	}
}

// TestEnqueueManyEvents: with an observer, EnqueueMany reports an Enqueued
// event for each item it stored, and none for one it did not; without
// one, it reads only the statuses, which are the same.
func TestEnqueueManyEvents(t *testing.T) {
	items := []pg.Item{{Domain: "a", Offset: 1, Payload: []byte("a1")}, {Domain: "a", Offset: 1, Payload: []byte("a1")},
		{Domain: "b", Offset: 2}, {Domain: "a", Offset: 3}}
	want := []worklease.AcquireStatus{worklease.Enqueued, worklease.AlreadyQueued, worklease.Enqueued, worklease.Enqueued}
	var mu sync.Mutex
	var events []string
	observed := newPullEnv(t, worklease.WithObserver(worklease.ObserverFunc(func(e worklease.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, fmt.Sprintf("%s %s/%d", e.Kind, e.Domain, e.Offset))
	})))
	quiet := newPullEnv(t)
	for _, e := range []*pullEnv{observed, quiet} {
		if st, err := e.m.EnqueueMany(e.ctx, items); err != nil || !slices.Equal(st, want) {
			t.Fatalf("EnqueueMany = %v, %v; want %v", st, err, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(events)
	if want := []string{"Enqueued a/1", "Enqueued a/3", "Enqueued b/2"}; !slices.Equal(events, want) {
		t.Errorf("events %q; want %q", events, want)
	}
}
