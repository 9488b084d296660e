// Command inmemory is the README's first program: one process, one
// Manager, and a goroutine for each domain at work, which runs the
// domain's events in order, one at a time. A failed attempt is retried
// under the same lease; a redelivered event runs once.
//
//	go run ./examples/inmemory
package main

import (
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/worklease/worklease"
)

func main() {
	m, err := worklease.New(worklease.WithMaxRetries(3))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	// Events as a stream delivers them, at least once: bob/1 comes twice.
	events := []struct {
		domain string
		offset int64
	}{{"alice", 0}, {"bob", 0}, {"alice", 1}, {"bob", 1}, {"alice", 2}, {"bob", 1}}
	var wg sync.WaitGroup
	for _, ev := range events {
		res, err := m.TryAcquire(ev.domain, ev.offset)
		if err != nil {
			log.Fatal(err)
		}
		// Acquired: ours to run. Enqueued: the domain's goroutine runs it
		// in its turn. AlreadyAcquired, AlreadyProcessed: a redelivery.
		if res.Status == worklease.Acquired {
			wg.Go(func() { run(m, ev.domain, ev.offset, res.Token) })
		}
	}
	wg.Wait()
}

// run works on offset, then on each offset queued behind it, in order.
func run(m *worklease.Manager, domain string, offset int64, tok worklease.Token) {
	for {
		var next worklease.LeaseInfo
		if err := apply(domain, offset, tok.Fence()); err != nil {
			res, ferr := m.FailNext(domain, tok, err)
			if ferr != nil {
				log.Print(ferr) // the lease is gone: the offset runs elsewhere
				return
			}
			if res.Status == worklease.RetryScheduled {
				fmt.Printf("%s/%d: %v, retry %d\n", domain, offset, err, res.RetryCount)
				time.Sleep(worklease.Backoff{}.Delay(res.RetryCount))
				continue // the same lease, the same token
			}
			next = res.Lease // out of retries: a dead letter; the next offset is ours
		} else {
			res, err := m.SucceedNext(domain, tok)
			if err != nil {
				log.Print(err)
				return
			}
			next = res.Lease // the next offset, if one is queued, is ours
		}
		if next.Token.IsZero() {
			return // nothing queued: the domain's next event starts a goroutine
		}
		offset, tok = next.Offset, next.Token
	}
}

var tried sync.Map // the attempts so far, by domain/offset

// apply is the work; it fails alice/1's first attempt. A real one writes
// once per (domain, offset), and where the fence is checked: a write under
// a fence lower than the last one seen comes from a lease that was lost.
func apply(domain string, offset int64, fence uint64) error {
	key := fmt.Sprintf("%s/%d", domain, offset)
	if _, again := tried.LoadOrStore(key, true); key == "alice/1" && !again {
		return errors.New("database busy")
	}
	fmt.Printf("%s (fence %d)\n", key, fence)
	return nil
}
