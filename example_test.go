package worklease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worklease/worklease"
)

// The orchestrator protocol: offer each event with TryAcquire; the worker
// that holds a domain's lease finishes each offset with SucceedNext (or
// FailNext), which leases it the next queued offset in the same step.
func Example() {
	m, err := worklease.New()
	if err != nil {
		panic(err)
	}

	// Three events for one domain arrive; the first is granted, and the
	// others wait behind it.
	var first worklease.AcquireResult
	for _, offset := range []int64{100, 101, 102} {
		res, err := m.TryAcquire("tenant-7", offset)
		if err != nil {
			panic(err)
		}
		fmt.Println("offer", offset, "->", res.Status)
		if res.Status == worklease.Acquired {
			first = res
		}
	}

	// The worker works through the domain in order: finishing one offset
	// leases it the next. An event that arrives meanwhile is queued.
	offset, tok := int64(100), first.Token
	for {
		res, err := m.SucceedNext("tenant-7", tok)
		if err != nil {
			panic(err)
		}
		fmt.Println("processed", offset, "->", res.Status, res.Lease.Offset)
		if res.Status != worklease.NextAcquired {
			break // nothing was granted: the domain is idle
		}
		offset, tok = res.Lease.Offset, res.Lease.Token
		if offset == 101 {
			late, err := m.TryAcquire("tenant-7", 103)
			if err != nil {
				panic(err)
			}
			fmt.Println("offer 103 ->", late.Status)
		}
	}
	// Output:
	// offer 100 -> Acquired
	// offer 101 -> Enqueued
	// offer 102 -> Enqueued
	// processed 100 -> NextAcquired 101
	// offer 103 -> Enqueued
	// processed 101 -> NextAcquired 102
	// processed 102 -> NextAcquired 103
	// processed 103 -> NoBacklog 0
}

// SucceedNext finishes an offset and leases the backlog's head to the
// caller in one step: the domain is never idle with a backlog, so an event
// that arrives during the hand-off is queued. With Succeed, the same event
// would be refused until the hint is followed.
func ExampleManager_SucceedNext() {
	m, _ := worklease.New()
	res, _ := m.TryAcquire("A", 1)
	_, _ = m.TryAcquire("A", 2)

	next, err := m.SucceedNext("A", res.Token)
	fmt.Println(next.Status, next.Lease.Offset, next.Lease.Token.Fence(), err)

	late, err := m.TryAcquire("A", 3)
	fmt.Println(late.Status, err)

	last, err := m.SucceedNext("A", next.Lease.Token)
	fmt.Println(last.Status, last.Lease.Offset, err)
	// Output:
	// NextAcquired 2 2 <nil>
	// Enqueued <nil>
	// NextAcquired 3 <nil>
}

// FailNext keeps the lease while retries remain; once the offset is given
// up on, the caller holds the next queued offset's lease.
func ExampleManager_FailNext() {
	m, _ := worklease.New(worklease.WithMaxRetries(1))
	res, _ := m.TryAcquire("A", 7)
	_, _ = m.TryAcquire("A", 8)

	for {
		f, err := m.FailNext("A", res.Token, errors.New("downstream timeout"))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(f.Status, f.RetryCount)
		if f.Status != worklease.RetryScheduled {
			fmt.Println("now holding", f.Lease.Offset)
			break
		}
		// The orchestrator backs off here, then retries under the same token.
	}
	// Output:
	// RetryScheduled 1
	// GiveUpNextAcquired 1
	// now holding 8
}

func ExampleManager_TryAcquire() {
	m, _ := worklease.New()

	res, _ := m.TryAcquire("account-42", 1)
	fmt.Println(res.Status, res.Token.Fence())

	// The same offset again (a redelivery) reports the holder's lease.
	again, _ := m.TryAcquire("account-42", 1)
	fmt.Println(again.Status, again.Token == res.Token)

	_, _ = m.Succeed("account-42", res.Token)

	// Finished work is never done twice.
	done, _ := m.TryAcquire("account-42", 1)
	fmt.Println(done.Status)
	// Output:
	// Acquired 1
	// AlreadyAcquired true
	// AlreadyProcessed
}

// Only the head of an idle domain's backlog may be acquired: anything else
// is a bug in the caller, reported as an error that changes nothing.
func ExampleManager_TryAcquire_outOfOrder() {
	m, _ := worklease.New()
	res, _ := m.TryAcquire("A", 1)
	_, _ = m.TryAcquire("A", 2)
	_, _ = m.TryAcquire("A", 3)
	_, _ = m.Succeed("A", res.Token)

	_, err := m.TryAcquire("A", 3)
	var orderErr *worklease.BacklogOrderError
	if errors.As(err, &orderErr) {
		fmt.Println("expected", orderErr.Expected, "got", orderErr.Got)
	}
	fmt.Println(errors.Is(err, worklease.ErrBacklogOrder))
	// Output:
	// expected 2 got 3
	// true
}

// Fencing: every grant in a domain carries a larger fence, so a store that
// remembers the highest fence it has accepted can refuse a stale writer.
func ExampleToken_Fence() {
	m, _ := worklease.New()
	a, _ := m.TryAcquire("A", 1)
	_, _ = m.Succeed("A", a.Token)
	b, _ := m.TryAcquire("A", 2)

	fmt.Println(a.Token.Fence() < b.Token.Fence())

	// The stale holder of offset 1 can no longer finish anything.
	_, err := m.Succeed("A", a.Token)
	fmt.Println(errors.Is(err, worklease.ErrTokenMismatch))
	// Output:
	// true
	// true
}

func ExampleManager_Fail() {
	m, _ := worklease.New(worklease.WithMaxRetries(2))
	res, _ := m.TryAcquire("A", 7)
	_, _ = m.TryAcquire("A", 8)

	for {
		f, _ := m.Fail("A", res.Token, errors.New("downstream timeout"))
		fmt.Println(f.Status, f.RetryCount)
		if f.Status != worklease.RetryScheduled {
			fmt.Println("next:", f.Next)
			break
		}
		// The orchestrator backs off here, then retries under the same token.
	}
	again, _ := m.TryAcquire("A", 7)
	fmt.Println(again.Status)
	// Output:
	// RetryScheduled 1
	// RetryScheduled 2
	// GiveUpNextHint 2
	// next: 8
	// AlreadyFailed
}

func ExampleParseToken() {
	m, _ := worklease.New()
	res, _ := m.TryAcquire("A", 1)

	// A token crosses a process boundary as text.
	parsed, err := worklease.ParseToken(res.Token.String())
	fmt.Println(err, parsed == res.Token)

	_, err = worklease.ParseToken("not-a-token")
	fmt.Println(errors.Is(err, worklease.ErrInvalidToken))
	// Output:
	// <nil> true
	// true
}

// fixedClock is a clock that tests and examples move by hand.
type fixedClock struct{ now time.Time }

func (c *fixedClock) Now() time.Time { return c.now }

// Time-limited leases: a worker that dies loses its lease when the TTL runs
// out, and Reap tells the orchestrator which domain to re-drive.
func ExampleManager_Reap() {
	clk := &fixedClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m, _ := worklease.New(worklease.WithLeaseTTL(30*time.Second), worklease.WithClock(clk))

	dead, _ := m.TryAcquire("tenant-7", 1) // this worker will never finish
	clk.now = clk.now.Add(time.Minute)

	expired, _ := m.Reap()
	for _, e := range expired {
		fmt.Println(e.Domain, "offset", e.Offset, "expired after", e.Attempts, "attempt; next:", e.Next, e.HasNext)
		again, _ := m.TryAcquire(e.Domain, e.Next)
		fmt.Println(again.Status, "with fence", again.Token.Fence(), "and retry count", again.RetryCount)
	}

	_, err := m.Succeed("tenant-7", dead.Token)
	fmt.Println(errors.Is(err, worklease.ErrLeaseExpired))
	// Output:
	// tenant-7 offset 1 expired after 1 attempt; next: 1 true
	// Acquired with fence 2 and retry count 1
	// true
}

// Long work renews its lease before it runs out.
func ExampleManager_Extend() {
	clk := &fixedClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m, _ := worklease.New(worklease.WithLeaseTTL(30*time.Second), worklease.WithClock(clk))
	res, _ := m.TryAcquire("A", 1)
	fmt.Println("expires", res.ExpiresAt.Format(time.TimeOnly))

	clk.now = clk.now.Add(20 * time.Second)
	expires, _ := m.Extend("A", res.Token, 30*time.Second)
	fmt.Println("renewed to", expires.Format(time.TimeOnly))

	_, _ = m.Succeed("A", res.Token)
	_, err := m.Extend("A", res.Token, 30*time.Second)
	fmt.Println(errors.Is(err, worklease.ErrNoLease))
	// Output:
	// expires 00:00:30
	// renewed to 00:00:50
	// true
}

// A dead letter keeps why it failed, and Redrive runs it again first in
// its domain's line.
func ExampleManager_Redrive() {
	m, _ := worklease.New(worklease.WithMaxRetries(0))
	res, _ := m.TryAcquire("A", 1)
	_, _ = m.TryAcquire("A", 2)
	_, _ = m.Fail("A", res.Token, errors.New("schema mismatch"))

	letters, _ := m.DeadLetters("A")
	fmt.Println(letters[0].Offset, letters[0].Cause, letters[0].Attempts)

	// Fix the cause, then put the offset back ahead of offset 2.
	head, _ := m.Redrive("A", 1)
	info, _ := m.Inspect("A")
	fmt.Println(head.Next, head.HasNext, info.Backlog)
	// Output:
	// 1 schema mismatch 1
	// 1 true [1 2]
}

// A Kafka partition split by key: the key "user-1" sees a sparse,
// increasing subsequence of the partition's offsets. After a consumer
// restart the partition is read again from its last commit, and the offsets
// already done come back AlreadyProcessed, as does every offset below the
// highest this key finished, even one that was another key's. The domain
// keeps its processed offsets as one run from 0, however many holes.
func ExampleWithMonotonicOffsets() {
	m, err := worklease.New(worklease.WithMonotonicOffsets())
	if err != nil {
		panic(err)
	}
	for _, off := range []int64{3, 17, 42, 108} {
		res, _ := m.TryAcquire("user-1", off)
		_, _ = m.Succeed("user-1", res.Token)
	}

	// The restart: the partition is replayed from offset 17.
	for _, off := range []int64{17, 42, 50, 108, 131} {
		res, _ := m.TryAcquire("user-1", off)
		fmt.Println(off, res.Status)
		if res.Status == worklease.Acquired {
			_, _ = m.Succeed("user-1", res.Token)
		}
	}
	info, _ := m.Inspect("user-1")
	fmt.Println("processed:", info.Processed)
	// Output:
	// 17 AlreadyProcessed
	// 42 AlreadyProcessed
	// 50 AlreadyProcessed
	// 108 AlreadyProcessed
	// 131 Acquired
	// processed: 132
}

func ExampleWithObserver() {
	m, _ := worklease.New(worklease.WithObserver(worklease.ObserverFunc(func(e worklease.Event) {
		fmt.Println(e.Kind, e.Domain, e.Offset, "attempt", e.Attempt)
	})))
	res, _ := m.TryAcquire("A", 7)
	_, _ = m.Fail("A", res.Token, errors.New("timeout"))
	_, _ = m.Succeed("A", res.Token)
	// Output:
	// Acquired A 7 attempt 1
	// Retrying A 7 attempt 1
	// Processed A 7 attempt 2
}

func ExampleBackoff() {
	b := worklease.Backoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: -1} // no jitter, for the example
	for retry := 1; retry <= 5; retry++ {
		fmt.Println(retry, b.Delay(retry))
	}
	// Output:
	// 1 200ms
	// 2 400ms
	// 3 800ms
	// 4 1s
	// 5 1s
}

// A backend that keeps its leases elsewhere, such as in a database, makes
// its tokens from parts of its own: the grant's fence, the domain's serial
// number and the backend's instance.
func ExampleNewToken() {
	tok, err := worklease.NewToken(3, 0x2a, 0x0123456789abcdef)
	if err != nil {
		panic(err)
	}
	fmt.Println(tok, tok.Fence(), tok.Serial())
	_, err = worklease.NewToken(0, 1, 1) // fences start at 1
	fmt.Println(errors.Is(err, worklease.ErrInvalidToken))
	// Output:
	// 3-2a-0123456789abcdef 3 42
	// true
}

// Code written against Backend runs on the in-memory Manager and on any
// other backend of the contract; each call takes a context first.
func ExampleManager_Backend() {
	m, err := worklease.New()
	if err != nil {
		panic(err)
	}
	b := m.Backend() // a worklease.Backend
	defer b.Close()

	ctx := context.Background()
	res, err := b.TryAcquire(ctx, "tenant-7", 0)
	if err != nil {
		panic(err)
	}
	done, err := b.Succeed(ctx, "tenant-7", res.Token)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, done.Status)

	// A context already done changes nothing.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.TryAcquire(canceled, "tenant-7", 1)
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// Acquired NoBacklog
	// true
}

// Pulling work in one process: producers enqueue offsets with their
// payloads, and workers claim the heads of ready domains, the longest
// waiting first, and end what they claimed in a batch.
func ExampleManager_Claim() {
	m, err := worklease.New()
	if err != nil {
		panic(err)
	}
	defer m.Close()

	// Producers: Enqueue never grants; a redelivery is stored once.
	for _, ev := range []struct {
		domain string
		offset int64
		body   string
	}{{"tenant-7", 0, "create"}, {"tenant-7", 1, "rename"}, {"tenant-9", 0, "create"}, {"tenant-7", 0, "create"}} {
		if _, err := m.Enqueue(ev.domain, ev.offset, []byte(ev.body)); err != nil {
			panic(err)
		}
	}

	// A worker: each claim leases a domain's head, one per domain.
	for {
		claims, err := m.Claim(10)
		if err != nil {
			panic(err)
		}
		if len(claims) == 0 {
			break // a long-running worker calls WaitClaim instead
		}
		for _, c := range claims {
			fmt.Printf("%s/%d %s (attempt %d)\n", c.Domain, c.Offset, c.Payload, c.Attempt)
		}
		if _, err := m.SucceedMany(claims); err != nil {
			panic(err)
		}
	}
	// Output:
	// tenant-7/0 create (attempt 1)
	// tenant-9/0 create (attempt 1)
	// tenant-7/1 rename (attempt 1)
}

// A failed attempt goes back to the front of its domain's line, claimable
// again once its delay has passed, without holding a worker while it
// waits; out of retries, it is a dead letter.
func ExampleManager_Retry() {
	clk := &fixedClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m, err := worklease.New(worklease.WithMaxRetries(1), worklease.WithClock(clk))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if _, err := m.Enqueue("tenant-7", 0, []byte("charge")); err != nil {
		panic(err)
	}
	backoff := worklease.Backoff{Jitter: -1}
	claims, _ := m.Claim(1)
	c := claims[0]
	res, err := m.Retry(c.Domain, c.Token, errors.New("card declined"), backoff.Delay(c.Attempt))
	if err != nil {
		panic(err)
	}
	fmt.Println("retries:", res.RetryCount, "dead letter:", res.DeadLettered)

	claims, _ = m.Claim(1)
	fmt.Println("claimed during the delay:", len(claims))
	clk.now = clk.now.Add(backoff.Delay(c.Attempt))
	claims, _ = m.Claim(1)
	c = claims[0]
	fmt.Println("claimed after it: attempt", c.Attempt, "of", string(c.Payload))

	res, _ = m.Retry(c.Domain, c.Token, errors.New("card declined"), backoff.Delay(c.Attempt))
	fmt.Println("retries:", res.RetryCount, "dead letter:", res.DeadLettered)
	dls, _ := m.DeadLetters("tenant-7")
	fmt.Println(dls[0].Offset, dls[0].Cause, dls[0].Attempts)
	// Output:
	// retries: 1 dead letter: false
	// claimed during the delay: 0
	// claimed after it: attempt 2 of charge
	// retries: 2 dead letter: true
	// 0 card declined 2
}

// A backend other than the Manager reads the same options with NewConfig.
func ExampleNewConfig() {
	cfg, err := worklease.NewConfig(worklease.WithLeaseTTL(30*time.Second), worklease.WithOrdering(worklease.LIFO))
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.LeaseTTL, cfg.Ordering, cfg.MaxRetries)

	_, err = worklease.NewConfig(worklease.WithMaxRetries(-1))
	fmt.Println(errors.Is(err, worklease.ErrInvalidConfig))
	// Output:
	// 30s LIFO 3
	// true
}
