package worklease_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/worklease/worklease"
)

// The orchestrator protocol: acquire, work, succeed or fail, follow the hint.
func Example() {
	m, err := worklease.New()
	if err != nil {
		panic(err)
	}

	// Three events for one domain arrive while the first is being worked on.
	first, _ := m.TryAcquire("tenant-7", 100)
	second, _ := m.TryAcquire("tenant-7", 101)
	third, _ := m.TryAcquire("tenant-7", 102)
	fmt.Println(first.Status, second.Status, third.Status)

	// Finishing hands nothing off: it hints at the next offset, which the
	// orchestrator acquires when it chooses to.
	tok := first.Token
	for {
		res, err := m.Succeed("tenant-7", tok)
		if err != nil {
			panic(err)
		}
		if res.Status == worklease.NoBacklog {
			fmt.Println("tenant-7 is idle")
			break
		}
		next, _ := m.TryAcquire("tenant-7", res.Next)
		fmt.Println(res.Status, res.Next, "->", next.Status)
		tok = next.Token
	}
	// Output:
	// Acquired Enqueued Enqueued
	// NextHint 101 -> Acquired
	// NextHint 102 -> Acquired
	// tenant-7 is idle
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
	next, ok, _ := m.Redrive("A", 1)
	info, _ := m.Inspect("A")
	fmt.Println(next, ok, info.Backlog)
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
