package pg_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// Every process that opens the same database shares its domains: a lease
// granted here is refused to a TryAcquire of another process until its
// holder finishes it, or its TTL runs out.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	m, err := pg.Open(ctx, pool, worklease.WithLeaseTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	res, err := m.TryAcquire(ctx, "tenant-7", 42)
	if err != nil {
		log.Fatal(err)
	}
	if res.Status != worklease.Acquired {
		return // in flight elsewhere, queued, or done already
	}
	// ... work on offset 42, writing with res.Token.Fence() ...
	done, err := m.SucceedNext(ctx, "tenant-7", res.Token)
	if err != nil {
		log.Fatal(err)
	}
	if done.Status == worklease.NextAcquired {
		fmt.Println("next:", done.Lease.Offset)
	}
}

// The examples below use a Manager from Open, and a store of their own
// whose writes carry the lease's fence.
var (
	ctx = context.Background()
	m   *pg.Manager
)

// A worker offers each event of a domain as it arrives; the status says
// what to do with it.
func ExampleManager_TryAcquire() {
	res, err := m.TryAcquire(ctx, "tenant-7", 42)
	if err != nil {
		log.Fatal(err)
	}
	switch res.Status {
	case worklease.Acquired:
		fmt.Println("work on offset 42, fence", res.Token.Fence())
	case worklease.Enqueued:
		fmt.Println("queued behind the lease in flight, in any process")
	case worklease.AlreadyAcquired, worklease.AlreadyProcessed, worklease.AlreadyFailed:
		fmt.Println("a duplicate: nothing to do")
	}
}

// SucceedNext finishes a lease and takes the domain's next queued offset
// in the same transaction, so no other process can take it in between.
func ExampleManager_SucceedNext() {
	res, err := m.TryAcquire(ctx, "tenant-7", 42)
	if err != nil || res.Status != worklease.Acquired {
		return
	}
	tok := res.Token
	for {
		// ... work on the lease's offset, writing with tok.Fence() ...
		done, err := m.SucceedNext(ctx, "tenant-7", tok)
		if err != nil {
			log.Fatal(err) // errors.Is(err, worklease.ErrLeaseExpired): another worker took over
		}
		if done.Status != worklease.NextAcquired {
			return // nothing queued: the domain is idle
		}
		tok = done.Lease.Token
	}
}

// A failed attempt keeps its lease, to try again after a backoff, until its
// retries run out and the offset becomes a dead letter.
func ExampleManager_Fail() {
	res, err := m.TryAcquire(ctx, "tenant-7", 42)
	if err != nil || res.Status != worklease.Acquired {
		return
	}
	failed, err := m.Fail(ctx, "tenant-7", res.Token, errors.New("upstream timed out"))
	if err != nil {
		log.Fatal(err)
	}
	switch failed.Status {
	case worklease.RetryScheduled:
		fmt.Println("try offset 42 again after a backoff, under the same token; retries so far:", failed.RetryCount)
	default:
		fmt.Println("offset 42 is a dead letter")
	}
}

// A long piece of work keeps its lease by extending it before it runs out.
func ExampleManager_Extend() {
	res, err := m.TryAcquire(ctx, "tenant-7", 42)
	if err != nil || res.Status != worklease.Acquired {
		return
	}
	expires, err := m.Extend(ctx, "tenant-7", res.Token, time.Minute)
	if err != nil {
		log.Fatal(err) // the lease was lost: stop working on it
	}
	fmt.Println("the lease now runs until", expires)
}

// One process, or several, reap the leases of workers that died, and offer
// each domain's head again.
func ExampleManager_Reap() {
	expired, err := m.Reap(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range expired {
		if e.HasNext {
			fmt.Printf("offer %s's offset %d again\n", e.Domain, e.Next)
		}
	}
}

// An operator puts a dead letter back at the front of its domain's line.
func ExampleManager_Redrive() {
	letters, err := m.DeadLetters(ctx, "tenant-7")
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range letters {
		head, err := m.Redrive(ctx, "tenant-7", l.Offset)
		if err != nil {
			log.Fatal(err)
		}
		if head.HasNext {
			fmt.Println("offer offset", head.Next)
		}
	}
}

// Pausing a domain lets its lease in flight finish and holds everything
// after it, in every process, until Resume.
func ExampleManager_Pause() {
	if err := m.Pause(ctx, "tenant-7"); err != nil {
		log.Fatal(err)
	}
	// ... a migration of tenant-7's data ...
	head, err := m.Resume(ctx, "tenant-7")
	if err != nil {
		log.Fatal(err)
	}
	if head.HasNext {
		fmt.Println("offer offset", head.Next)
	}
}

// Inspect reads one domain; Stats counts every process's transitions.
func ExampleManager_Inspect() {
	info, err := m.Inspect(ctx, "tenant-7")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leased:", info.Leased, "queued:", len(info.Backlog), "processed:", info.Processed)
	stats, err := m.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired in all:", stats.Acquired)
}

// Several independent sets of domains can share a database, each in a
// schema of its own.
func ExampleOpenSchema() {
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	billing, err := pg.OpenSchema(ctx, pool, "billing_leases", worklease.WithMaxRetries(5))
	if err != nil {
		log.Fatal(err)
	}
	defer billing.Close()
}

// A producer stores each event with its payload; any worker of any
// process claims ready domains' heads, ends those that succeeded in one
// call, and lets a failure wait out its delay at the front of its
// domain's line without holding the worker.
func ExampleManager_Claim() {
	if _, err := m.Enqueue(ctx, "tenant-7", 42, []byte(`{"amount": 10}`)); err != nil {
		log.Fatal(err)
	}
	var backoff worklease.Backoff
	claims, err := m.Claim(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	var done []worklease.Claim
	for _, c := range claims {
		if err := handle(c.Payload, c.Token.Fence()); err != nil {
			if _, err := m.Retry(ctx, c.Domain, c.Token, err, backoff.Delay(c.Attempt)); err != nil {
				log.Print(err) // the lease was lost: another worker has the offset
			}
			continue
		}
		done = append(done, c)
	}
	errs, err := m.SucceedMany(ctx, done) // one statement for the batch
	if err != nil {
		log.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			log.Printf("%s/%d: %v", done[i].Domain, done[i].Offset, err) // the lease was lost
		}
	}
}

// A producer stores a batch of events in one round trip; each item's
// status says whether it was stored or was known already.
func ExampleManager_EnqueueMany() {
	items := []pg.Item{
		{Domain: "tenant-7", Offset: 43, Payload: []byte(`{"amount": 5}`)},
		{Domain: "tenant-9", Offset: 12, Payload: []byte(`{"amount": 7}`)},
	}
	statuses, err := m.EnqueueMany(ctx, items)
	if err != nil {
		log.Fatal(err) // nothing of the batch was stored
	}
	for i, st := range statuses {
		if st == worklease.AlreadyProcessed {
			log.Printf("%s/%d is done already", items[i].Domain, items[i].Offset)
		}
	}
}

// A worker waits for ready domains, works each offset it holds, and ends
// them with ClaimNext, which leases the same domains' next offsets to it in
// the same round trip; it claims anew when that leases nothing.
func ExampleManager_ClaimNext() {
	var next []worklease.Claim
	for ctx.Err() == nil {
		claims := next
		if len(claims) == 0 {
			var err error
			if claims, err = m.WaitClaim(ctx, 10, 0); err != nil { // 0: the default poll
				return
			}
		}
		var done []worklease.Claim
		for _, c := range claims {
			if err := handle(c.Payload, c.Token.Fence()); err != nil {
				if _, err := m.Retry(ctx, c.Domain, c.Token, err, time.Second); err != nil {
					log.Print(err) // the lease was lost: another worker has the offset
				}
				continue
			}
			done = append(done, c)
		}
		var errs []error
		var err error
		next, errs, err = m.ClaimNext(ctx, done)
		if err != nil {
			log.Print(err) // with pg.ErrOutcomeUnknown, any next leases expire
			continue
		}
		for i, err := range errs {
			if err != nil {
				log.Printf("%s/%d: %v", done[i].Domain, done[i].Offset, err) // the lease was lost
			}
		}
	}
}

// handle is the examples' work: it writes through fence.
func handle(payload []byte, fence uint64) error { return nil }

// A service writes its row and enqueues the work that follows from it in
// one transaction: both happen, or neither, and waiting workers of every
// process are woken when it commits. The domain's row stays locked until
// then: enqueue last, just before committing.
func ExampleManager_EnqueueTx() {
	var pool *pgxpool.Pool // on m's database
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit, it does nothing
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id, tenant) VALUES ($1, $2)", 7, "tenant-7"); err != nil {
		log.Fatal(err)
	}
	if _, err := m.EnqueueTx(ctx, tx, "tenant-7", 7, []byte(`{"order":7}`)); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err) // neither the order nor its work was stored
	}
}
