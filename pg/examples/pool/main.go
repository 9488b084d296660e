// Command pool is the README's PostgreSQL program: a worker Pool on the
// PostgreSQL backend. Run it in two terminals against one database: each
// process stores the same 100 offsets of three domains (each is stored
// once, and runs once), and both run what is ready, each domain's offsets
// in order, one at a time, whichever process claims them. Ctrl-C stops a
// process; the other takes over what is left.
//
//	cd pg && go run ./examples/pool -url postgres://localhost/app
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
	"github.com/worklease/worklease/worker"
)

func main() {
	url := flag.String("url", os.Getenv("DATABASE_URL"), "the database the processes share")
	flag.Parse()
	interrupted, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	db, err := pgxpool.New(interrupted, *url)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	m, err := pg.Open(interrupted, db, worklease.WithLeaseTTL(30*time.Second), worklease.WithMaxRetries(5))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	me := os.Getpid()
	p, err := worker.New(m, func(ctx context.Context, job worker.Job) error {
		// At least once: an effect keyed by (domain, offset) is written
		// once, and storage refuses a fence older than the last it saw.
		fmt.Printf("process %d: %s/%d %q (fence %d)\n", me, job.Domain, job.Offset, job.Payload, job.Token.Fence())
		time.Sleep(50 * time.Millisecond) // the work
		return nil                        // an error is retried after a backoff
	}, worker.WithWorkers(8))
	if err != nil {
		log.Fatal(err)
	}
	go p.Run(context.Background())

	for off := range int64(100) {
		for _, domain := range []string{"alice", "bob", "carol"} {
			if _, err := p.Submit(interrupted, domain, off, fmt.Appendf(nil, "event %d", off)); err != nil {
				log.Fatal(err)
			}
		}
	}
	<-interrupted.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil { // lets running handlers finish
		log.Print(err)
	}
}
