package pg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/leasetest"
	"github.com/worklease/worklease/pg"
)

// pullEnv is a Manager on a fresh schema, with a clock of its own.
type pullEnv struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	schema string
	clock  *leasetest.Clock
	m      *pg.Manager
}

func newPullEnv(t *testing.T, opts ...worklease.Option) *pullEnv {
	t.Helper()
	e := &pullEnv{t: t, ctx: context.Background(), pool: testPool(t), schema: newSchemaName(),
		clock: leasetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	t.Cleanup(func() { dropSchema(t, e.pool, e.schema) })
	m, err := pg.OpenSchema(e.ctx, e.pool, e.schema, append([]worklease.Option{worklease.WithClock(e.clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(func() {
		if err := checkRows(e.ctx, e.pool, e.schema); err != nil {
			t.Error(err)
		}
	})
	return e
}

func (e *pullEnv) enqueue(domain string, offset int64, payload string, want worklease.AcquireStatus) {
	e.t.Helper()
	st, err := e.m.Enqueue(e.ctx, domain, offset, []byte(payload))
	if err != nil || st != want {
		e.t.Fatalf("Enqueue(%s, %d) = %v, %v; want %v", domain, offset, st, err, want)
	}
}

// claim claims up to n, and returns "domain/offset:payload@attempt" for each.
func (e *pullEnv) claim(n int) ([]worklease.Claim, []string) {
	e.t.Helper()
	cs, err := e.m.Claim(e.ctx, n)
	if err != nil {
		e.t.Fatalf("Claim(%d): %v", n, err)
	}
	var s []string
	for _, c := range cs {
		s = append(s, fmt.Sprintf("%s/%d:%s@%d", c.Domain, c.Offset, c.Payload, c.Attempt))
	}
	return cs, s
}

func (e *pullEnv) count(table string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, "SELECT count(*) FROM "+pgx.Identifier{e.schema}.Sanitize()+"."+table).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// Enqueued offsets are claimed in order, one lease per domain at a time,
// with their payloads, which are deleted when they succeed; an offset is
// stored once, and a finished one answers so forever.
func TestEnqueueAndClaim(t *testing.T) {
	e := newPullEnv(t)
	e.enqueue("a", 1, "a1", worklease.Enqueued)
	e.enqueue("a", 2, "a2", worklease.Enqueued)
	e.enqueue("a", 2, "a2", worklease.AlreadyQueued) // queued already: stored once
	if _, err := e.m.Enqueue(e.ctx, "a", 2, []byte("again")); !errors.Is(err, worklease.ErrPayloadMismatch) {
		t.Fatalf("Enqueue(a, 2) with another payload: %v; want ErrPayloadMismatch", err)
	}
	e.clock.Advance(time.Millisecond) // b is ready after a
	e.enqueue("b", 7, "b7", worklease.Enqueued)
	e.clock.Advance(time.Second)

	cs, got := e.claim(10)
	if want := []string{"a/1:a1@1", "b/7:b7@1"}; !equal(got, want) {
		t.Fatalf("first claim: %v; want %v", got, want)
	}
	if _, got := e.claim(10); len(got) != 0 {
		t.Fatalf("claim while both are leased: %v; want none", got)
	}
	e.enqueue("a", 1, "a1", worklease.AlreadyAcquired)
	if _, err := e.m.Succeed(e.ctx, "a", cs[0].Token); err != nil {
		t.Fatal(err)
	}
	e.enqueue("a", 1, "", worklease.AlreadyProcessed)
	cs2, got := e.claim(10)
	if want := []string{"a/2:a2@1"}; !equal(got, want) {
		t.Fatalf("claim after a/1 succeeded: %v; want %v", got, want)
	}
	for _, c := range []worklease.Claim{cs[1], cs2[0]} {
		if _, err := e.m.Succeed(e.ctx, c.Domain, c.Token); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.count("payloads"); n != 0 {
		t.Fatalf("%d payloads left after every offset succeeded", n)
	}
	if _, got := e.claim(10); len(got) != 0 {
		t.Fatalf("claim with nothing queued: %v", got)
	}
	for _, n := range []int{0, -1, pg.MaxClaim + 1, 20_000} {
		_, err := e.m.Claim(e.ctx, n)
		if !errors.Is(err, pg.ErrInvalidClaim) || !errors.Is(err, worklease.ErrInvalidClaim) {
			t.Fatalf("Claim(%d): %v; want pg.ErrInvalidClaim and worklease.ErrInvalidClaim", n, err)
		}
		// One sentence: the rule with its bounds, and the call.
		if want := fmt.Sprintf("pg: claim count must be 1 to 10000 (Claim of %d)", n); err.Error() != want {
			t.Errorf("Claim(%d): %q; want %q", n, err, want)
		}
	}
}

// A failed attempt waits out its delay at the front of its domain's line,
// keeping its payload; past its retries it is a dead letter, which Redrive
// makes claimable again.
func TestRetry(t *testing.T) {
	e := newPullEnv(t, worklease.WithMaxRetries(1))
	e.enqueue("a", 1, "a1", worklease.Enqueued)
	e.enqueue("a", 2, "a2", worklease.Enqueued)
	cs, _ := e.claim(1)

	res, err := e.m.Retry(e.ctx, "a", cs[0].Token, errors.New("flaky"), time.Minute)
	if err != nil || res.DeadLettered || res.RetryCount != 1 {
		t.Fatalf("Retry: %+v, %v; want a retry, the first", res, err)
	}
	if _, err := e.m.Succeed(e.ctx, "a", cs[0].Token); !errors.Is(err, worklease.ErrNoLease) {
		t.Fatalf("Succeed with the retried token: %v; want ErrNoLease", err)
	}
	e.clock.Advance(59 * time.Second)
	if _, got := e.claim(5); len(got) != 0 {
		t.Fatalf("claim before the delay ends: %v; want none (a/2 must not overtake a/1)", got)
	}
	e.clock.Advance(time.Second)
	cs, got := e.claim(5)
	if want := []string{"a/1:a1@2"}; !equal(got, want) {
		t.Fatalf("claim after the delay: %v; want %v", got, want)
	}

	res, err = e.m.Retry(e.ctx, "a", cs[0].Token, errors.New("flaky again"), time.Minute)
	if err != nil || !res.DeadLettered || res.RetryCount != 2 {
		t.Fatalf("Retry past the retries: %+v, %v; want a dead letter after 2 failed attempts", res, err)
	}
	letters, err := e.m.DeadLetters(e.ctx, "a")
	if err != nil || len(letters) != 1 || letters[0].Offset != 1 || letters[0].Cause == nil || letters[0].Cause.Error() != "flaky again" {
		t.Fatalf("DeadLetters: %+v, %v", letters, err)
	}
	_, got = e.claim(5)
	if want := []string{"a/2:a2@1"}; !equal(got, want) {
		t.Fatalf("claim after the dead letter: %v; want %v", got, want)
	}
	if n := e.count("payloads"); n != 2 {
		t.Fatalf("%d payloads; want 2: the dead letter's and the lease's", n)
	}
}

// A claim takes over a domain whose lease is due, as the next attempt of
// the same offset; the late holder is refused.
func TestClaimTakesOverExpired(t *testing.T) {
	e := newPullEnv(t, worklease.WithLeaseTTL(time.Minute))
	e.enqueue("a", 1, "a1", worklease.Enqueued)
	first, _ := e.claim(1)
	e.clock.Advance(time.Minute)
	cs, got := e.claim(1)
	if want := []string{"a/1:a1@2"}; !equal(got, want) {
		t.Fatalf("claim after the lease ran out: %v; want %v", got, want)
	}
	if !cs[0].ExpiresAt.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("the new lease expires at %v; want %v", cs[0].ExpiresAt, e.clock.Now().Add(time.Minute))
	}
	if _, err := e.m.Succeed(e.ctx, "a", first[0].Token); !errors.Is(err, worklease.ErrLeaseExpired) {
		t.Fatalf("Succeed by the late holder: %v; want ErrLeaseExpired", err)
	}
	if _, err := e.m.Succeed(e.ctx, "a", cs[0].Token); err != nil {
		t.Fatal(err)
	}
}

// A paused domain is not claimed until it resumes.
func TestClaimSkipsPaused(t *testing.T) {
	e := newPullEnv(t)
	e.enqueue("a", 1, "a1", worklease.Enqueued)
	if err := e.m.Pause(e.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, got := e.claim(1); len(got) != 0 {
		t.Fatalf("claim of a paused domain: %v", got)
	}
	if _, err := e.m.Resume(e.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, got := e.claim(1); !equal(got, []string{"a/1:a1@1"}) {
		t.Fatalf("claim after Resume: %v", got)
	}
}

// Claims go round the ready domains: a domain whose offset just finished
// goes behind the others, so one with a deep backlog does not starve the
// rest. Here one domain has 10,000 offsets queued and 99 have 10 each; a
// worker claims one at a time, and the 99 are done while the deep one has
// finished no more than its share.
func TestClaimIsFair(t *testing.T) {
	const deep, shallow, each = 10_000, 99, 10
	e := newPullEnv(t)
	var items []pg.Item
	for i := range deep {
		items = append(items, pg.Item{Domain: "deep", Offset: int64(i)})
	}
	for d := range shallow {
		for i := range each {
			items = append(items, pg.Item{Domain: fmt.Sprintf("s%02d", d), Offset: int64(i)})
		}
	}
	if _, err := e.m.EnqueueMany(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	left, deepDone := shallow*each, 0
	for left > 0 {
		e.clock.Advance(time.Millisecond)
		cs, _ := e.claim(1)
		if len(cs) != 1 {
			t.Fatalf("claim with %d shallow offsets left: %d claims", left, len(cs))
		}
		if cs[0].Domain == "deep" {
			deepDone++
		} else {
			left--
		}
		if _, err := e.m.Succeed(e.ctx, cs[0].Domain, cs[0].Token); err != nil {
			t.Fatal(err)
		}
	}
	if deepDone > each+1 {
		t.Fatalf("the deep domain finished %d offsets before the %d shallow ones were done; want at most %d", deepDone, shallow, each+1)
	}
}

// EnqueueMany stores a batch in one transaction, each domain's items in the
// order given, and answers for each item as Enqueue would; an invalid item
// stores nothing.
func TestEnqueueMany(t *testing.T) {
	e := newPullEnv(t)
	e.enqueue("a", 1, "a1", worklease.Enqueued)
	cs, _ := e.claim(1)
	if _, err := e.m.Succeed(e.ctx, "a", cs[0].Token); err != nil {
		t.Fatal(err)
	}
	items := []pg.Item{
		{Domain: "b", Offset: 5, Payload: []byte("b5")},
		{Domain: "a", Offset: 1, Payload: []byte("again")}, // processed
		{Domain: "a", Offset: 3, Payload: []byte("a3")},
		{Domain: "b", Offset: 4, Payload: []byte("b4")}, // after 5: queued in the order given
		{Domain: "a", Offset: 3, Payload: []byte("a3")}, // given earlier in the batch
		{Domain: "c", Offset: 0},
	}
	// An item given earlier in the batch with another payload refuses the
	// batch: nothing is stored, not even the domains it names.
	mismatch := append(slices.Clone(items), pg.Item{Domain: "a", Offset: 3, Payload: []byte("other")}, pg.Item{Domain: "e", Offset: 1})
	if _, err := e.m.EnqueueMany(e.ctx, mismatch); !errors.Is(err, worklease.ErrPayloadMismatch) {
		t.Fatalf("EnqueueMany with a mismatched payload: %v; want ErrPayloadMismatch", err)
	}
	if page, err := e.m.ListDomains(e.ctx, worklease.DomainQuery{}); err != nil || len(page.Domains) != 1 {
		t.Fatalf("domains after the refused batch: %+v, %v; want a alone", page.Domains, err)
	}
	got, err := e.m.EnqueueMany(e.ctx, items)
	want := []worklease.AcquireStatus{worklease.Enqueued, worklease.AlreadyProcessed, worklease.Enqueued,
		worklease.Enqueued, worklease.AlreadyQueued, worklease.Enqueued}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("EnqueueMany: %v, %v; want %v", got, err, want)
	}
	order := make(map[string][]string) // each domain's claims, in order
	for {
		e.clock.Advance(time.Millisecond)
		cs, got := e.claim(10)
		if len(cs) == 0 {
			break
		}
		for i, c := range cs {
			order[c.Domain] = append(order[c.Domain], got[i])
		}
		for _, c := range cs {
			if _, err := e.m.Succeed(e.ctx, c.Domain, c.Token); err != nil {
				t.Fatal(err)
			}
		}
	}
	want2 := map[string][]string{"a": {"a/3:a3@1"}, "b": {"b/5:b5@1", "b/4:b4@1"}, "c": {"c/0:@1"}}
	if fmt.Sprint(order) != fmt.Sprint(want2) {
		t.Fatalf("claims by domain: %v; want %v", order, want2)
	}

	bad := []pg.Item{{Domain: "d", Offset: 1}, {Domain: "", Offset: 2}}
	if _, err := e.m.EnqueueMany(e.ctx, bad); !errors.Is(err, worklease.ErrInvalidDomain) {
		t.Fatalf("EnqueueMany with an empty domain: %v; want ErrInvalidDomain", err)
	}
	if info, err := e.m.Inspect(e.ctx, "d"); err != nil || len(info.Backlog) != 0 {
		t.Fatalf("domain d after the refused batch: %+v, %v; want nothing stored", info, err)
	}
}

// Batches that share domains, in opposite orders, run side by side
// without a deadlock.
func TestEnqueueManyConcurrently(t *testing.T) {
	const batches, domains = 20, 8
	e := newPullEnv(t)
	errs := make(chan error, 2)
	for w := range 2 {
		go func() {
			for b := range batches {
				var items []pg.Item
				for d := range domains {
					if w == 1 {
						d = domains - 1 - d
					}
					items = append(items, pg.Item{Domain: fmt.Sprintf("d%d", d), Offset: int64(2*b + w)})
				}
				if _, err := e.m.EnqueueMany(e.ctx, items); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for d := range domains {
		info, err := e.m.Inspect(e.ctx, fmt.Sprintf("d%d", d))
		if err != nil || len(info.Backlog) != 2*batches {
			t.Fatalf("d%d: %d queued, %v; want %d", d, len(info.Backlog), err, 2*batches)
		}
	}
}

// SucceedMany ends a batch of leases at once; a token that is not its
// domain's current one gets Succeed's error, and changes nothing.
func TestSucceedMany(t *testing.T) {
	e := newPullEnv(t, worklease.WithLeaseTTL(time.Minute))
	e.enqueue("a", 1, "a1", worklease.Enqueued)
	e.enqueue("a", 2, "a2", worklease.Enqueued)
	e.clock.Advance(time.Millisecond) // a is ready first
	e.enqueue("b", 1, "b1", worklease.Enqueued)
	e.clock.Advance(time.Millisecond) // then b, then c
	e.enqueue("c", 1, "c1", worklease.Enqueued)
	e.clock.Advance(time.Millisecond)
	first, _ := e.claim(1) // a's lease, which will expire
	if first[0].Domain != "a" {
		t.Fatalf("first claim: %v", first[0].Domain)
	}
	e.clock.Advance(time.Minute)
	cs, got := e.claim(10)
	// a, taken over, became ready again after b and c.
	if want := []string{"b/1:b1@1", "c/1:c1@1", "a/1:a1@2"}; !equal(got, want) {
		t.Fatalf("claims: %v; want %v", got, want)
	}
	batch := append(cs, first[0], cs[1]) // a stale token, and c twice
	errs, err := e.m.SucceedMany(e.ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, nil, nil, worklease.ErrLeaseExpired, worklease.ErrNoLease} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("claim %d (%s): %v; want %v", i, batch[i].Domain, errs[i], want)
		}
	}
	if n := e.count("payloads"); n != 1 {
		t.Fatalf("%d payloads; want 1, a/2's", n)
	}
	e.clock.Advance(time.Millisecond)
	if _, got := e.claim(10); !equal(got, []string{"a/2:a2@1"}) {
		t.Fatalf("claim after the batch: %v; want a's next offset", got)
	}
	for _, d := range []string{"b", "c"} {
		if res, err := e.m.TryAcquire(e.ctx, d, 1); err != nil || res.Status != worklease.AlreadyProcessed {
			t.Fatalf("TryAcquire(%s, 1): %v, %v; want AlreadyProcessed", d, res.Status, err)
		}
	}

	// Claims of one domain are answered in order, also when the first
	// carries another database's token: that one is refused while the
	// lease is held, then the lease ends.
	e.enqueue("d", 1, "", worklease.Enqueued)
	e.clock.Advance(time.Millisecond)
	cs, _ = e.claim(1)
	foreign, err := worklease.NewToken(cs[0].Token.Fence(), cs[0].Token.Serial(), cs[0].Token.Instance()+1)
	if err != nil {
		t.Fatal(err)
	}
	batch = []worklease.Claim{{Domain: "d", Offset: 1, Token: foreign}, cs[0]}
	if errs, err = e.m.SucceedMany(e.ctx, batch); err != nil || !errors.Is(errs[0], worklease.ErrTokenMismatch) || errs[1] != nil {
		t.Fatalf("SucceedMany of another database's token, then the lease's: %v, %v; want ErrTokenMismatch, then nil", errs, err)
	}
}

// ClaimNext ends a batch of leases and leases each domain's next offset,
// with its payload, to the caller, MaxStreak times in a row at most: then
// the domain goes behind those that waited. A token that is not its
// domain's gets Succeed's error and no next lease; a paused domain and one
// with nothing queued get none either.
func TestClaimNext(t *testing.T) {
	e := newPullEnv(t, worklease.WithLeaseTTL(time.Minute))
	for i := range pg.MaxStreak + 2 {
		e.enqueue("deep", int64(i), fmt.Sprintf("d%d", i), worklease.Enqueued)
	}
	e.clock.Advance(time.Millisecond)
	e.enqueue("one", 1, "o1", worklease.Enqueued)
	e.clock.Advance(time.Millisecond)
	e.enqueue("paused", 1, "p1", worklease.Enqueued)
	e.enqueue("paused", 2, "p2", worklease.Enqueued)
	e.clock.Advance(time.Millisecond)
	e.enqueue("later", 1, "l1", worklease.Enqueued)
	e.clock.Advance(time.Millisecond)
	cs, got := e.claim(3)
	if want := []string{"deep/0:d0@1", "one/1:o1@1", "paused/1:p1@1"}; !equal(got, want) {
		t.Fatalf("claims: %v; want %v", got, want)
	}
	if err := e.m.Pause(e.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	stale := cs[0]
	next, errs, err := e.m.ClaimNext(e.ctx, cs)
	if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("ClaimNext: %v, %v", errs, err)
	}
	if len(next) != 1 || next[0].Domain != "deep" || next[0].Offset != 1 || string(next[0].Payload) != "d1" ||
		next[0].Attempt != 1 || next[0].Token.Fence() != stale.Token.Fence()+1 || next[0].ExpiresAt.IsZero() {
		t.Fatalf("ClaimNext: %+v; want deep's offset 1 under the next fence", next)
	}
	// Repeated, as after ErrOutcomeUnknown, it answers with the lease it
	// granted, and changes nothing.
	again, errs, err := e.m.ClaimNext(e.ctx, []worklease.Claim{stale})
	if err != nil || errs[0] != nil || len(again) != 1 || again[0].Domain != "deep" || again[0].Offset != 1 ||
		string(again[0].Payload) != "d1" || again[0].Token != next[0].Token || again[0].Attempt != 1 ||
		!again[0].ExpiresAt.Equal(next[0].ExpiresAt) {
		t.Fatalf("ClaimNext repeated: %+v, %v, %v; want %+v", again, errs, err, next)
	}
	// The ended lease's token is spent for the other calls.
	if errs, err := e.m.SucceedMany(e.ctx, []worklease.Claim{stale}); err != nil || !errors.Is(errs[0], worklease.ErrTokenMismatch) {
		t.Fatalf("SucceedMany of a spent token: %v, %v; want ErrTokenMismatch", errs, err)
	}
	// deep goes on to MaxStreak leases in a row, then waits behind later.
	for i := 2; i <= pg.MaxStreak; i++ {
		next, errs, err = e.m.ClaimNext(e.ctx, next)
		if err != nil || errs[0] != nil || len(next) != 1 || next[0].Offset != int64(i) {
			t.Fatalf("ClaimNext %d: %+v, %v, %v; want deep's offset %d", i, next, errs, err, i)
		}
	}
	// Once the lease it granted has ended, a repeat is refused.
	if _, errs, err := e.m.ClaimNext(e.ctx, []worklease.Claim{stale}); err != nil || !errors.Is(errs[0], worklease.ErrTokenMismatch) {
		t.Fatalf("ClaimNext repeated late: %v, %v; want ErrTokenMismatch", errs, err)
	}
	e.clock.Advance(time.Millisecond)
	if next, errs, err = e.m.ClaimNext(e.ctx, next); err != nil || errs[0] != nil || len(next) != 0 {
		t.Fatalf("ClaimNext after %d in a row: %+v, %v, %v; want no next lease", pg.MaxStreak, next, errs, err)
	}
	if _, got := e.claim(10); !equal(got, []string{"later/1:l1@1", fmt.Sprintf("deep/%d:d%d@1", pg.MaxStreak+1, pg.MaxStreak+1)}) {
		t.Fatalf("claims after the streak: %v; want later's, then deep's", got)
	}
	if info, err := e.m.Inspect(e.ctx, "paused"); err != nil || len(info.Backlog) != 1 || info.Lease.Token != (worklease.Token{}) {
		t.Fatalf("paused domain: %+v, %v; want idle with offset 2 queued", info, err)
	}
	if n := e.count("payloads"); n != 3 {
		t.Fatalf("%d payloads; want 3: paused's offset 2, and the two leases in flight", n)
	}
}

// Claims take the ready domains of a higher priority first, however long
// the others have waited.
func TestClaimPriority(t *testing.T) {
	e := newPullEnv(t)
	e.enqueue("low", 1, "", worklease.Enqueued)
	e.clock.Advance(time.Millisecond)
	e.enqueue("mid", 1, "", worklease.Enqueued)
	e.clock.Advance(time.Millisecond)
	e.enqueue("high", 1, "", worklease.Enqueued)
	for d, p := range map[string]int32{"high": 10, "low": -1} {
		if err := e.m.SetPriority(e.ctx, d, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.m.SetPriority(e.ctx, "", 1); !errors.Is(err, worklease.ErrInvalidDomain) {
		t.Fatalf("SetPriority of an empty domain: %v; want ErrInvalidDomain", err)
	}
	var order []string
	for range 3 {
		_, got := e.claim(1)
		order = append(order, got...)
	}
	if want := []string{"high/1:@1", "mid/1:@1", "low/1:@1"}; !equal(order, want) {
		t.Fatalf("claims: %v; want %v", order, want)
	}
}

// A waiting claim wakes when another process's call makes a domain ready,
// long before its poll; it returns its context's error when that ends, and
// Close stops its listening.
func TestWaitClaim(t *testing.T) {
	e := newPullEnv(t)
	// Only the notification ends the wait, long before the poll.
	pg.WaitOnNotifications(e.m)
	producer, err := pg.OpenSchema(e.ctx, testPool(t), e.schema, worklease.WithClock(e.clock)) // another process
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	const poll = time.Minute
	type result struct {
		claims []worklease.Claim
		err    error
		took   time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		cs, err := e.m.WaitClaim(e.ctx, 5, poll)
		done <- result{cs, err, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond) // the claim is waiting by now
	if _, err := producer.Enqueue(e.ctx, "a", 1, []byte("a1")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.claims) != 1 || r.claims[0].Domain != "a" {
			t.Fatalf("WaitClaim: %v, %v", r.claims, r.err)
		}
		t.Logf("woken after %v", r.took)
	case <-time.After(10 * time.Second):
		t.Fatalf("WaitClaim did not wake within 10s of the Enqueue (its poll is %v)", poll)
	}

	ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	defer cancel()
	if cs, err := e.m.WaitClaim(ctx, 5, poll); !errors.Is(err, context.DeadlineExceeded) || len(cs) != 0 {
		t.Fatalf("WaitClaim with nothing ready until its context ended: %v, %v; want DeadlineExceeded", cs, err)
	}
	// Close wakes a waiting claim, which says the Manager is closed.
	closed := make(chan error, 1)
	go func() {
		_, err := e.m.WaitClaim(e.ctx, 5, poll)
		closed <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-closed:
		if !errors.Is(err, worklease.ErrClosed) {
			t.Fatalf("a waiting claim at Close: %v; want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake a waiting claim")
	}
	if _, err := e.m.WaitClaim(e.ctx, 5, poll); !errors.Is(err, worklease.ErrClosed) {
		t.Fatalf("WaitClaim after Close: %v; want ErrClosed", err)
	}
}

// A ready domain that another transaction holds locked as a claim looks
// (a producer storing into it, say) is passed over, and nothing notifies
// when the lock goes, as the domain did not become ready then: a waiting
// claim finds it on one of its first short waits, long before its poll.
func TestWaitClaimFindsDomainLockedAtItsClaim(t *testing.T) {
	e := newPullEnv(t)
	defer e.m.Close()
	e.enqueue("a", 1, "a1", worklease.Enqueued)
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(e.ctx) }()
	domains := pgx.Identifier{e.schema, "domains"}.Sanitize()
	if _, err := tx.Exec(e.ctx, "SELECT FROM "+domains+" WHERE domain = $1 FOR UPDATE", []byte("a")); err != nil {
		t.Fatal(err)
	}
	const poll = time.Minute
	done := make(chan []worklease.Claim, 1)
	go func() {
		got, _ := e.m.WaitClaim(e.ctx, 1, poll)
		done <- got
	}()
	time.Sleep(200 * time.Millisecond) // the claim passed a over, and waits
	select {
	case got := <-done:
		t.Fatalf("WaitClaim returned %+v while a was locked", got)
	default:
	}
	if err := tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if len(got) != 1 || got[0].Domain != "a" || got[0].Offset != 1 {
			t.Fatalf("WaitClaim after the lock went: %+v; want a/1", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("WaitClaim did not claim a within 10s of its lock going (its poll is %v)", poll)
	}
}

// Of a Manager's claims that wait with nothing ready, one at a time
// rechecks after short waits; the others wait for a notification or their
// poll.
func TestWaitClaimsRecheckOneAtATime(t *testing.T) {
	e := newPullEnv(t)
	defer e.m.Close()
	var claims atomic.Int32
	m, err := pg.OpenSchema(e.ctx, otherProcess(t, e.pool, "recheck_"+e.schema, &claims), e.schema)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const waiting = 10
	ctx, cancel := context.WithTimeout(e.ctx, time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range waiting {
		wg.Go(func() {
			if cs, err := m.WaitClaim(ctx, 1, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("WaitClaim with nothing ready: %v, %v; want DeadlineExceeded", cs, err)
			}
		})
	}
	wg.Wait()
	// A claim each, one claim's rechecks after about 5, 15, 35, 75, 155,
	// 315 and 635 ms (eight at most, the waits jittered shorter), and
	// perhaps one claim woken as the Manager begins to listen: 17 to 19;
	// ten that each rechecked would claim about 80 times.
	n := claims.Load()
	t.Logf("%d waiting claims claimed %d times", waiting, n)
	if n <= waiting || n > 3*waiting {
		t.Errorf("%d waiting claims claimed %d times in a second; want one each and a few rechecks", waiting, n)
	}
}

// A retry without a delay makes its domain ready at once, and wakes a
// waiting claim.
func TestWaitClaimAfterRetry(t *testing.T) {
	e := newPullEnv(t)
	defer e.m.Close()
	pg.WaitOnNotifications(e.m)
	other, err := pg.OpenSchema(e.ctx, testPool(t), e.schema, worklease.WithClock(e.clock)) // another process
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	e.enqueue("b", 1, "b1", worklease.Enqueued)
	cs, err := other.Claim(e.ctx, 1)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim: %v, %v", cs, err)
	}
	done := make(chan []worklease.Claim, 1)
	go func() {
		got, _ := e.m.WaitClaim(e.ctx, 1, time.Minute)
		done <- got
	}()
	time.Sleep(200 * time.Millisecond) // the claim is waiting by now
	if _, err := other.Retry(e.ctx, "b", cs[0].Token, errors.New("again"), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if len(got) != 1 || got[0].Offset != 1 || got[0].Attempt != 2 {
			t.Fatalf("WaitClaim after the retry: %+v; want b/1, attempt 2", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a retry without a delay did not wake the waiting claim")
	}
}
