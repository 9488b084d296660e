package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// The worker processes are this program again, with these set.
const (
	roleEnv = "WORKLEASE_EXAMPLE_ROLE" // "worker"
	urlEnv  = "WORKLEASE_EXAMPLE_URL"
	ttlEnv  = "WORKLEASE_EXAMPLE_TTL"  // -ttl
	workEnv = "WORKLEASE_EXAMPLE_WORK" // -work
)

// schema is where the example keeps the queue and its own tables; each run
// starts it afresh.
const schema = "multiprocess_example"

// The example's tables: applied holds each offset's effect, in the order
// they took effect (seq), and fences each domain's latest fence written.
const tables = `
CREATE TABLE multiprocess_example.applied (
	seq bigserial, domain text NOT NULL, off bigint NOT NULL, fence bigint NOT NULL, pid int NOT NULL,
	PRIMARY KEY (domain, off));
CREATE TABLE multiprocess_example.fences (domain text PRIMARY KEY, fence bigint NOT NULL);`

// open opens the Manager every process of the example uses.
func open(ctx context.Context, pool *pgxpool.Pool, cfg config) (*pg.Manager, error) {
	return pg.OpenSchema(ctx, pool, schema, worklease.WithLeaseTTL(cfg.ttl), worklease.WithMaxRetries(1000))
}

// domainName is domain d's name.
func domainName(d int) string { return fmt.Sprintf("tenant-%03d", d) }

// coordinate is the parent process: it sets up the schema, produces,
// starts the workers, kills one midway, waits for every offset to finish,
// stops the others and checks what happened.
func coordinate(ctx context.Context, cfg config, out io.Writer) error {
	pool, err := pgxpool.New(ctx, cfg.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return err
	}
	m, err := open(ctx, pool, cfg)
	if err != nil {
		return err
	}
	defer m.Close()
	if _, err := pool.Exec(ctx, tables); err != nil {
		return err
	}
	total := cfg.domains * cfg.offsets

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	workers := make([]*exec.Cmd, cfg.workers)
	for i := range workers {
		w := exec.Command(exe)
		w.Env = append(os.Environ(), roleEnv+"=worker", urlEnv+"="+cfg.url, ttlEnv+"="+cfg.ttl.String(), workEnv+"="+cfg.work.String())
		w.Stdout, w.Stderr = os.Stderr, os.Stderr
		if err := w.Start(); err != nil {
			return err
		}
		workers[i] = w
		defer func() { _ = w.Process.Kill(); _ = w.Wait() }()
	}
	fmt.Fprintf(out, "%d worker processes claim from %d domains × %d offsets\n", cfg.workers, cfg.domains, cfg.offsets)

	// The producer stores each domain's offsets in order, a wave of every
	// domain's next offset at a time, in one round trip each.
	produced := make(chan error, 1)
	go func() {
		for o := range cfg.offsets {
			items := make([]pg.Item, cfg.domains)
			for d := range items {
				items[d] = pg.Item{Domain: domainName(d), Offset: int64(o), Payload: fmt.Appendf(nil, `{"offset": %d}`, o)}
			}
			if _, err := m.EnqueueMany(ctx, items); err != nil {
				produced <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		produced <- nil
	}()

	killed, start := -1, time.Now()
	var killedLeases int
	for tick := time.NewTicker(500 * time.Millisecond); ; <-tick.C {
		var applied int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".applied").Scan(&applied); err != nil {
			return err
		}
		leases, err := m.Leases(ctx)
		if err != nil {
			return err
		}
		if !cfg.quiet {
			fmt.Fprintf(out, "%5.1fs  %d/%d offsets applied, %d leases held\n", time.Since(start).Seconds(), applied, total, len(leases))
		}
		if killed < 0 && float64(applied) >= cfg.killAfter*float64(total) {
			killed, killedLeases = 0, len(leases)
			if err := workers[0].Process.Signal(syscall.SIGKILL); err != nil {
				return err
			}
			fmt.Fprintf(out, "killed worker 1 (pid %d) with SIGKILL, with %d leases held in all: its own come back when their %v TTL runs out\n",
				workers[0].Process.Pid, len(leases), cfg.ttl)
		}
		if applied == total && len(leases) == 0 {
			break
		}
	}
	if err := <-produced; err != nil {
		return err
	}
	// Every offset took effect: stop the workers that are left.
	for i, w := range workers {
		if i != killed {
			_ = w.Process.Signal(syscall.SIGTERM)
		}
	}
	for i, w := range workers {
		if err := w.Wait(); err != nil && i != killed {
			return fmt.Errorf("worker %d: %v", i+1, err)
		}
	}
	return check(ctx, m, pool, cfg, out, workers[killed].Process.Pid, killedLeases, time.Since(start))
}

// check checks that every domain's offsets took effect once each, in
// order, under growing fences, and that each domain is done: every offset
// succeeded, nothing is held or queued.
func check(ctx context.Context, m *pg.Manager, pool *pgxpool.Pool, cfg config, out io.Writer, killedPID, killedLeases int, took time.Duration) error {
	rows, err := pool.Query(ctx, "SELECT domain, off, fence, pid FROM "+schema+".applied ORDER BY seq")
	if err != nil {
		return err
	}
	defer rows.Close()
	next := make(map[string]int64)
	fence := make(map[string]int64)
	byKilled, failed := 0, false
	for rows.Next() {
		var domain string
		var off, f int64
		var pid int
		if err := rows.Scan(&domain, &off, &f, &pid); err != nil {
			return err
		}
		if off != next[domain] || f < fence[domain] {
			fmt.Fprintf(out, "FAIL: %s: offset %d under fence %d took effect after offset %d under fence %d\n",
				domain, off, f, next[domain]-1, fence[domain])
			failed = true
		}
		next[domain], fence[domain] = off+1, f
		if pid == killedPID {
			byKilled++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for d := range cfg.domains {
		name := domainName(d)
		info, err := m.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if next[name] != int64(cfg.offsets) || info.Processed != int64(cfg.offsets) || info.Leased || len(info.Backlog) > 0 {
			fmt.Fprintf(out, "FAIL: %s: %d offsets took effect, %d succeeded, leased %v, %d queued; want %d, %d, no, 0\n",
				name, next[name], info.Processed, info.Leased, len(info.Backlog), cfg.offsets, cfg.offsets)
			failed = true
		}
	}
	stats, err := m.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "summary: %d offsets took effect in %v, each once and in order in every domain\n", cfg.domains*cfg.offsets, took.Round(time.Millisecond))
	fmt.Fprintf(out, "         %d leases granted, %d attempts failed and retried, %d leases expired and were taken over\n",
		stats.Acquired, stats.Retried, stats.Expired)
	fmt.Fprintf(out, "         the killed worker applied %d offsets before it died; %d leases were held in all when it did\n", byKilled, killedLeases)
	if failed {
		return errCheck
	}
	fmt.Fprintln(out, "verified: every domain's offsets took effect exactly once, in order")
	return nil
}
