package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// A Pool runs a handler on the offsets submitted to it, each domain's in
// order and one at a time; a failed attempt is retried after a backoff,
// without holding up the other domains.
func Example() {
	m, err := worklease.New(worklease.WithMaxRetries(3))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	var mu sync.Mutex
	applied := map[string][]string{} // what the handler wrote, by domain
	done := make(chan struct{})
	failedOnce := false
	handle := func(ctx context.Context, job worker.Job) error {
		mu.Lock()
		defer mu.Unlock()
		if job.Domain == "tenant-1" && job.Offset == 2 && !failedOnce {
			failedOnce = true
			return errors.New("database busy") // retried after the Pool's backoff
		}
		applied[job.Domain] = append(applied[job.Domain], fmt.Sprintf("%d:%s", job.Offset, job.Payload))
		if len(applied["tenant-1"])+len(applied["tenant-2"]) == 6 {
			close(done)
		}
		return nil
	}
	p, err := worker.New(m.Backend(), handle, worker.WithWorkers(4),
		worker.WithBackoff(worklease.Backoff{Base: 1e6})) // 1ms, then 2ms, 4ms...
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	go p.Run(ctx)
	for off := int64(1); off <= 3; off++ {
		for _, d := range []string{"tenant-1", "tenant-2"} {
			if _, err := p.Submit(ctx, d, off, []byte(fmt.Sprintf("event-%d", off))); err != nil {
				panic(err)
			}
		}
	}
	<-done
	if err := p.Stop(ctx); err != nil {
		panic(err)
	}
	fmt.Println(applied["tenant-1"])
	fmt.Println(applied["tenant-2"])
	st := p.Stats()
	fmt.Println("succeeded:", st.Succeeded, "retried:", st.Retried)
	// Output:
	// [1:event-1 2:event-2 3:event-3]
	// [1:event-1 2:event-2 3:event-3]
	// succeeded: 6 retried: 1
}

// Submit applies back-pressure: at most WithQueueLimit offsets submitted
// through the Pool are unfinished at once. With WithSubmitNoWait, Submit
// says so at once rather than wait for room.
func ExamplePool_Submit() {
	m, _ := worklease.New()
	defer m.Close()
	p, _ := worker.New(m.Backend(), func(context.Context, worker.Job) error { return nil },
		worker.WithQueueLimit(2), worker.WithSubmitNoWait())
	ctx := context.Background()
	submit := func(off int64) {
		if st, err := p.Submit(ctx, "tenant-1", off, nil); err != nil {
			fmt.Println(off, err)
		} else {
			fmt.Println(off, st)
		}
	}
	for off := int64(1); off <= 3; off++ {
		submit(off) // the Pool is not running: nothing finishes
	}
	submit(2) // a redelivery takes no more room
	fmt.Println("queued:", p.Stats().Queued)
	// Output:
	// 1 Enqueued
	// 2 Enqueued
	// 3 worker: queue full
	// 2 AlreadyQueued
	// queued: 2
}

// Giving the backend and the Pool the same observer tells it every event
// of a job once: the backend's transitions, and the Pool's EventStarted.
func ExampleWithObserver() {
	var mu sync.Mutex
	var kinds []string
	done := make(chan struct{})
	events := worklease.ObserverFunc(func(e worklease.Event) {
		mu.Lock()
		defer mu.Unlock()
		kinds = append(kinds, e.Kind.String())
		if e.Kind == worklease.EventProcessed {
			close(done)
		}
	})
	m, _ := worklease.New(worklease.WithObserver(events))
	defer m.Close()
	p, _ := worker.New(m.Backend(), func(context.Context, worker.Job) error { return nil }, worker.WithObserver(events))
	ctx := context.Background()
	// Submitted before Run: the backend leaves a call's events to a
	// goroutine still telling the domain's earlier ones (here Submit's,
	// were the Pool running), which may tell them after the Pool's
	// EventStarted.
	_, _ = p.Submit(ctx, "tenant-1", 1, nil)
	go p.Run(ctx)
	<-done
	_ = p.Stop(ctx)
	mu.Lock()
	defer mu.Unlock()
	fmt.Println(kinds)
	// Output:
	// [Enqueued Acquired Started Processed]
}

// A handler passes its job's fence to storage, which refuses writes under
// a fence lower than one it has seen: a worker that lost its lease, say
// to a pause long enough for another to take the offset over, cannot undo
// the newer holder's work.
func ExampleJob_fencing() {
	db := &fencedTable{rows: map[string]string{}, fences: map[string]uint64{}}
	m, _ := worklease.New()
	defer m.Close()
	done := make(chan struct{})
	p, _ := worker.New(m.Backend(), func(ctx context.Context, job worker.Job) error {
		err := db.put(job.Domain, string(job.Payload), job.Token.Fence())
		if job.Offset == 2 {
			close(done)
		}
		return err
	})
	ctx := context.Background()
	go p.Run(ctx)
	_, _ = p.Submit(ctx, "account-9", 1, []byte("balance=10"))
	_, _ = p.Submit(ctx, "account-9", 2, []byte("balance=25"))
	<-done
	_ = p.Stop(ctx)
	fmt.Println(db.rows["account-9"])
	fmt.Println(db.put("account-9", "balance=0", 1)) // a stale holder's write
	// Output:
	// balance=25
	// stale fence 1 (the row's is 2)
}

// fencedTable is storage that keeps each row's highest fence.
type fencedTable struct {
	mu     sync.Mutex
	rows   map[string]string
	fences map[string]uint64
}

func (t *fencedTable) put(key, value string, fence uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if fence < t.fences[key] {
		return fmt.Errorf("stale fence %d (the row's is %d)", fence, t.fences[key])
	}
	t.rows[key], t.fences[key] = value, fence
	return nil
}
