// Command multiprocess shows the pull queue shared by several processes on
// one PostgreSQL database: a producer stores each domain's offsets in
// order, with payloads; worker processes claim ready domains' heads, apply
// each offset's effect through its lease's fence, and end their batches
// with SucceedMany; midway, one worker is killed with SIGKILL while it
// holds leases, and the others take its domains over once their leases
// expire. At the end it checks that every domain's offsets took effect
// exactly once and in order, and prints a summary.
//
// The effect of an offset is a row of the applied table, written only if
// the offset is the one after the domain's last applied (in order), and
// only through a fence no older than the domain's last (no stale holder):
// a worker killed after the effect and before its Succeed leaves an offset
// that the next holder finds applied already, and just succeeds.
//
// By default it starts a throwaway PostgreSQL server (initdb into a
// temporary directory, on 127.0.0.1 and a free port; as root, as the
// postgres user), and removes it at the end; -url uses a running one.
//
//	cd pg && go run ./examples/multiprocess
//	cd pg && go run ./examples/multiprocess -workers 4 -domains 50 -offsets 500
//
// The exit status is 0 if every check passed, 1 otherwise, and 2 for a
// usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// config is what the flags set.
type config struct {
	url                       string
	workers, domains, offsets int
	ttl, work                 time.Duration
	quiet                     bool
	killAfter                 float64 // the share of offsets applied before the kill
}

func main() {
	var cfg config
	flag.StringVar(&cfg.url, "url", "", "a PostgreSQL server's URL (default: start a throwaway one)")
	flag.IntVar(&cfg.workers, "workers", 3, "worker processes")
	flag.IntVar(&cfg.domains, "domains", 20, "domains")
	flag.IntVar(&cfg.offsets, "offsets", 200, "offsets in each domain")
	flag.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "lease TTL")
	flag.DurationVar(&cfg.work, "work", 2*time.Millisecond, "how long applying an offset takes")
	flag.BoolVar(&cfg.quiet, "quiet", false, "print only the summary")
	flag.Parse()
	cfg.killAfter = 0.3
	if os.Getenv(roleEnv) == "worker" {
		os.Exit(workerMain())
	}
	if cfg.workers < 2 || cfg.domains < 1 || cfg.offsets < 1 || cfg.ttl <= 0 || cfg.work < 0 {
		fmt.Fprintln(os.Stderr, "multiprocess: want -workers ≥ 2 (one is killed), -domains ≥ 1, -offsets ≥ 1, -ttl > 0, -work ≥ 0")
		os.Exit(2)
	}
	out := io.Writer(os.Stdout)
	if err := run(context.Background(), cfg, out); err != nil {
		fmt.Fprintln(os.Stderr, "multiprocess:", err)
		os.Exit(1)
	}
}

// run runs the example: a server if cfg.url is empty, the producer, the
// workers, the kill, and the checks.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.url == "" {
		srv, err := startServer()
		if err != nil {
			return err
		}
		defer srv.stop()
		cfg.url = srv.url
		fmt.Fprintln(out, "started a throwaway PostgreSQL server on", srv.addr)
	}
	return coordinate(ctx, cfg, out)
}

// errCheck is the error of a failed check.
var errCheck = errors.New("check failed")
