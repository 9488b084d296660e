package pg_test

import (
	"context"
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
