package pg_test

import (
	"testing"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// Reproductions of bugs found in review of the pull queue's statements
// (fastpull.go, migration 2). They fail until the bugs are fixed.

// EnqueueMany that makes a domain ready wakes a waiting claim of another
// process, as Enqueue does, long before its poll.
func TestWaitClaimAfterEnqueueMany(t *testing.T) {
	e := newPullEnv(t)
	defer e.m.Close()
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
