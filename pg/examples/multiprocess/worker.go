package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
)

// workerMain runs a worker process, configured by the coordinator's
// environment variables, and returns its exit status.
func workerMain() int {
	cfg := config{url: os.Getenv(urlEnv)}
	var err error
	if cfg.ttl, err = time.ParseDuration(os.Getenv(ttlEnv)); err == nil {
		cfg.work, err = time.ParseDuration(os.Getenv(workEnv))
	}
	if err == nil {
		err = worker(context.Background(), cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// worker is a worker process: until SIGTERM, it claims a batch of ready
// domains' heads, applies each offset's effect through its fence (one in
// fifty fails, and is retried after a delay), and ends the batch with
// SucceedMany.
func worker(ctx context.Context, cfg config) error {
	stop, cancel := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer cancel()
	pool, err := pgxpool.New(ctx, cfg.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := open(ctx, pool, cfg)
	if err != nil {
		return err
	}
	defer m.Close()
	var backoff worklease.Backoff
	batch := 10
	for stop.Err() == nil {
		claims, err := m.Claim(ctx, batch)
		if err != nil {
			return err
		}
		// The batch grows while claims come back full, and shrinks when
		// none does.
		switch len(claims) {
		case batch:
			batch = min(2*batch, 100)
		case 0:
			batch = max(batch/2, 10)
			time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
			continue
		}
		var done []worklease.Claim
		for _, c := range claims {
			if rand.IntN(50) == 0 {
				if _, err := m.Retry(ctx, c.Domain, c.Token, errors.New("upstream busy"), backoff.Delay(c.Attempt)); err != nil && !lost(err) {
					return err
				}
				continue
			}
			time.Sleep(cfg.work)
			applied, err := apply(ctx, pool, c)
			if err != nil {
				return err
			}
			if applied {
				done = append(done, c)
			}
		}
		errs, err := m.SucceedMany(ctx, done)
		if err != nil {
			return err
		}
		for _, err := range errs {
			if err != nil && !lost(err) {
				return err
			}
		}
	}
	return nil
}

// apply applies c's effect, once: it records the offset as applied,
// through c's fence, in one transaction. It reports false if a later
// holder of the domain wrote before (the lease was lost; the work is that
// holder's now). An offset applied already, by a holder killed before its
// Succeed, counts as applied.
func apply(ctx context.Context, pool *pgxpool.Pool, c worklease.Claim) (bool, error) {
	fenced := true
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "INSERT INTO "+schema+".fences AS f VALUES ($1, $2) "+
			"ON CONFLICT (domain) DO UPDATE SET fence = $2 WHERE f.fence <= $2", c.Domain, int64(c.Token.Fence()))
		if err != nil {
			return err
		}
		if fenced = tag.RowsAffected() == 1; !fenced {
			return nil
		}
		_, err = tx.Exec(ctx, "INSERT INTO "+schema+".applied (domain, off, fence, pid) VALUES ($1, $2, $3, $4) "+
			"ON CONFLICT (domain, off) DO NOTHING", c.Domain, c.Offset, int64(c.Token.Fence()), os.Getpid())
		return err
	})
	if err != nil {
		return false, fmt.Errorf("applying %s/%d: %w", c.Domain, c.Offset, err)
	}
	return fenced, nil
}

// lost reports whether err says that the lease is gone: it expired and
// another worker took the offset over.
func lost(err error) bool {
	return errors.Is(err, worklease.ErrLeaseExpired) || errors.Is(err, worklease.ErrTokenMismatch) ||
		errors.Is(err, worklease.ErrNoLease)
}
