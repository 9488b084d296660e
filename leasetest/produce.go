package leasetest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// testProduce is the Produce area: the producers' side. Duplicates that
// say which state their offset is in, or that refuse another payload;
// Append, which assigns offsets that never collide and repeats a call by
// its idempotency key; the payload limit; scheduled work (EnqueueAt and
// Append's NotBefore); and Cancel. Two cases replay the collisions of
// producers that chose their own offsets, and then make the same calls
// with Append, which loses nothing.
func testProduce(t *testing.T, s *Suite) {
	const (
		dup, limit, app = FeatureDuplicates, FeaturePayloadLimit, FeatureAppend
		at, cancel      = FeatureEnqueueAt, FeatureCancel
	)
	runCases(t, s, []testCase{
		{"Duplicates", needs(testDuplicates, dup, at)},
		{"AppendAssigns", needs(testAppendAssigns, app)},
		{"AppendKey", needs(testAppendKey, app, cancel)},
		{"AppendKeyWindow", needs(testAppendKeyWindow, app)},
		{"AppendKeyRestart", needs(testAppendKeyRestart, app)},
		{"AppendConcurrent", needs(testAppendConcurrent, app)},
		{"TwoProducersNumberingTheirOwn", needs(testTwoProducersNumbering, dup, app)},
		{"SequenceCommittedOutOfOrder", needs(testSequenceOutOfOrder, app)},
		{"PayloadLimit", needs(testPayloadLimit, limit, at, app)},
		{"Scheduled", needs(testScheduled, at, app)},
		{"ScheduledHoldsGrants", needs(testScheduledHoldsGrants, at)},
		{"ScheduledRestart", needs(testScheduledRestart, at)},
		{"ScheduledBeforeRetryDelay", needs(testScheduledBeforeRetryDelay, at)},
		{"ScheduledHeadReplaced", needs(testScheduledHeadReplaced, at)},
		{"Cancel", needs(testCancel, cancel, at)},
		{"CancelInFlight", needs(testCancelInFlight, cancel)},
		{"CancelEvents", needs(testCancelEvents, cancel)},
		{"BadInput", needs(testProduceBadInput, limit, at, app, cancel)},
		{"PayloadsRestart", testPayloadsRestart},
	})
}

// needs returns run, which first skips its test if the backend lacks any
// of fs.
func needs(run func(*testing.T, *Suite), fs ...Feature) func(*testing.T, *Suite) {
	return func(t *testing.T, s *Suite) {
		s.need(t, fs...)
		run(t, s)
	}
}

// testDuplicates: an offset the domain holds is stored once, and a call
// says which state it is in; one with another payload is refused while
// the domain still has the first one's, in whatever state.
func testDuplicates(t *testing.T, s *Suite) {
	e := s.startPayloads(t, worklease.WithMaxRetries(0))
	mismatch := func(d string, off int64, p []byte) {
		t.Helper()
		e.refused(worklease.ErrPayloadMismatch, func() error { _, err := e.b.Enqueue(e.ctx, d, off, p); return err })
	}
	e.enqueue("A", 1, []byte("one"), worklease.Enqueued)
	e.enqueue("A", 1, []byte("one"), worklease.AlreadyQueued)
	mismatch("A", 1, []byte("uno"))
	mismatch("A", 1, nil)      // stored with a payload, offered without
	mismatch("A", 1, []byte{}) // empty is a payload, and another
	e.enqueue("A", 2, nil, worklease.Enqueued)
	e.enqueue("A", 2, nil, worklease.AlreadyQueued)
	mismatch("A", 2, []byte("two")) // stored without
	e.enqueue("A", 3, []byte{}, worklease.Enqueued)
	e.enqueue("A", 3, []byte{}, worklease.AlreadyQueued)
	mismatch("A", 3, nil)
	st, err := e.b.EnqueueAt(e.ctx, "A", 1, []byte("one"), epoch.Add(time.Hour))
	mustNoError(t, err, "EnqueueAt of a queued offset")
	mustEqual(t, worklease.AlreadyQueued, st, "EnqueueAt of a queued offset")

	c := e.claim(1, "A/1@1")[0]
	e.enqueue("A", 1, []byte("one"), worklease.AlreadyAcquired)
	mismatch("A", 1, []byte("uno"))
	e.fail("A", c.Token, nil) // no retries: a dead letter, which keeps its payload
	e.enqueue("A", 1, []byte("one"), worklease.AlreadyFailed)
	mismatch("A", 1, []byte("uno"))
	e.succeed("A", e.claim(1, "A/2@1")[0].Token)
	// A processed offset's payload is gone: nothing to compare with.
	e.enqueue("A", 2, []byte("anything"), worklease.AlreadyProcessed)
	mustEqual(t, worklease.DomainInfo{Backlog: []int64{3}, Processed: 1, Failed: 1}, e.inspect("A"))
	e.check()
}

// testAppendAssigns: Append assigns one more than the highest offset the
// domain holds, in whatever state, and its offsets run in the order
// assigned, each with its payload.
func testAppendAssigns(t *testing.T, s *Suite) {
	e := s.startPayloads(t)
	for want := range int64(3) {
		mustEqual(t, worklease.AppendResult{Offset: want, Status: worklease.Enqueued}, e.append("A", fmt.Appendf(nil, "a%d", want), ""))
	}
	for off := range int64(3) {
		c := e.claim(1, fmt.Sprintf("A/%d@1", off))[0]
		mustEqual(t, fmt.Appendf(nil, "a%d", off), c.Payload, "A/%d's payload", off)
		e.succeed("A", c.Token)
	}
	mustEqual(t, int64(3), e.append("A", nil, "").Offset, "Append after the domain's offsets succeeded")

	b := s.start(t)
	b.enqueue("B", 41, nil, worklease.Enqueued) // chosen offsets first
	mustEqual(t, int64(42), b.append("B", nil, "").Offset, "Append after a chosen offset")
	b.succeed("B", b.claim(1, "B/41@1")[0].Token)
	tok := b.claim(1, "B/42@1")[0].Token
	mustEqual(t, int64(43), b.append("B", nil, "").Offset, "Append with 41 processed and 42 in flight")
	b.succeed("B", tok)
	b.enqueue("B", 10, nil, worklease.Enqueued) // a chosen offset below: FIFO is arrival order
	b.clk.Advance(time.Millisecond)
	b.kill("C", 7, "poison") // a dead letter the domain never queued
	mustEqual(t, int64(8), b.append("C", nil, "").Offset, "Append after a dead letter")
	tok = b.claim(1, "B/43@1")[0].Token
	b.clk.Advance(time.Millisecond) // B is ready again after C
	b.succeed("B", tok)
	b.succeed("B", b.claim(2, "C/8@1", "B/10@1")[1].Token)
	e.check()
	b.check()
}

// testAppendKey: an Append repeated with its key stores nothing and
// answers with the first one's offset and its state, whatever that is
// now; with another payload it is refused. A key is the domain's.
func testAppendKey(t *testing.T, s *Suite) {
	e := s.startPayloads(t, worklease.WithMaxRetries(0))
	first := e.append("A", []byte("email 7"), "order-7")
	mustEqual(t, worklease.AppendResult{Offset: 0, Status: worklease.Enqueued}, first)
	again := e.append("A", []byte("email 7"), "order-7")
	mustEqual(t, worklease.AppendResult{Offset: 0, Status: worklease.AlreadyQueued}, again, "the repeated Append")
	mustEqual(t, worklease.DomainInfo{Backlog: []int64{0}}, e.inspect("A"), "after the repeated Append")
	e.refused(worklease.ErrPayloadMismatch, func() error {
		_, err := e.b.Append(e.ctx, "A", []byte("email 8"), worklease.AppendOptions{Key: "order-7"})
		return err
	})
	e.refused(worklease.ErrPayloadMismatch, func() error {
		_, err := e.b.Append(e.ctx, "A", nil, worklease.AppendOptions{Key: "order-7"})
		return err
	})
	mustEqual(t, worklease.AppendResult{Offset: 1, Status: worklease.Enqueued}, e.append("A", []byte("email 7"), "order-7 again"),
		"another key, the same payload")
	other := s.start(t)
	mustEqual(t, worklease.AppendResult{Offset: 0, Status: worklease.Enqueued}, other.append("B", nil, "order-7"),
		"the same key on another domain")
	e.cancel("A", 1, false)
	mustEqual(t, int64(2), e.append("A", []byte("other"), "order-8").Offset, "another key, after a cancelled offset")

	c := e.claim(1, "A/0@1")[0]
	mustEqual(t, worklease.AppendResult{Offset: 0, Status: worklease.AlreadyAcquired}, e.append("A", []byte("email 7"), "order-7"))
	e.succeed("A", c.Token)
	mustEqual(t, worklease.AppendResult{Offset: 0, Status: worklease.AlreadyProcessed}, e.append("A", []byte("email 7"), "order-7"))
	// The payload is gone with its offset; the key still knows it.
	e.refused(worklease.ErrPayloadMismatch, func() error {
		_, err := e.b.Append(e.ctx, "A", []byte("email 8"), worklease.AppendOptions{Key: "order-7"})
		return err
	})
	c = e.claim(1, "A/2@1")[0]
	e.fail("A", c.Token, nil)
	mustEqual(t, worklease.AppendResult{Offset: 2, Status: worklease.AlreadyFailed}, e.append("A", []byte("other"), "order-8"))
	mustEqual(t, worklease.AppendResult{Offset: 1, Status: worklease.AlreadyProcessed}, e.append("A", []byte("email 7"), "order-7 again"),
		"the key of a cancelled offset")
	mustEqual(t, worklease.DomainInfo{Processed: 2, Failed: 1}, e.inspect("A"))
	e.check()
}

// testAppendKeyWindow: a key is kept for the key window after its Append;
// then the same key makes a new Append.
func testAppendKeyWindow(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithKeyWindow(time.Minute))
	mustEqual(t, int64(0), e.append("A", nil, "k").Offset)
	e.clk.Advance(time.Minute - time.Millisecond)
	mustEqual(t, worklease.AppendResult{Offset: 0, Status: worklease.AlreadyQueued}, e.append("A", nil, "k"), "within the window")
	e.clk.Advance(time.Millisecond)
	mustEqual(t, worklease.AppendResult{Offset: 1, Status: worklease.Enqueued}, e.append("A", nil, "k"), "past the window")
	mustEqual(t, worklease.AppendResult{Offset: 1, Status: worklease.AlreadyQueued}, e.append("A", nil, "k"), "within the new window")
	e.check()
}

// testAppendKeyRestart: keys, and the offsets Append assigns, survive a
// restart.
func testAppendKeyRestart(t *testing.T, s *Suite) {
	e := s.startPayloads(t)
	e.append("A", []byte("x"), "k1")
	e.append("A", []byte("y"), "k2")
	e.reopen()
	mustEqual(t, worklease.AppendResult{Offset: 0, Status: worklease.AlreadyQueued}, e.append("A", []byte("x"), "k1"))
	mustEqual(t, worklease.AppendResult{Offset: 1, Status: worklease.AlreadyQueued}, e.append("A", []byte("y"), "k2"))
	mustEqual(t, worklease.AppendResult{Offset: 2, Status: worklease.Enqueued}, e.append("A", []byte("z"), "k3"))
	c := e.claim(1, "A/0@1")[0]
	mustEqual(t, []byte("x"), c.Payload, "A/0's payload after a restart")
	e.check()
}

// testAppendConcurrent: producers that Append to one domain at once get
// offsets 0 to n-1, each once, and the domain runs them in the order
// assigned, each with its producer's payload.
func testAppendConcurrent(t *testing.T, s *Suite) {
	const producers, each = 4, 25
	e := s.startPayloads(t)
	var mu sync.Mutex
	got := map[int64]string{} // offset: payload
	errs := make(chan error, producers)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				payload := fmt.Sprintf("p%d-%d", p, i)
				res, err := e.b.Append(e.ctx, "A", []byte(payload), worklease.AppendOptions{Key: payload})
				if err != nil || res.Status != worklease.Enqueued {
					errs <- fmt.Errorf("the Append of %s: %v, %v", payload, res, err)
					return
				}
				mu.Lock()
				if prev, ok := got[res.Offset]; ok {
					errs <- fmt.Errorf("offset %d assigned to %s and %s", res.Offset, prev, payload)
				}
				got[res.Offset] = payload
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mustEqual(t, producers*each, len(got), "offsets assigned")
	for off := range int64(producers * each) {
		c := e.claim(1, fmt.Sprintf("A/%d@1", off))[0]
		mustEqual(t, got[off], string(c.Payload), "A/%d's payload", off)
		e.succeed("A", c.Token)
	}
	e.check()
}

// testTwoProducersNumbering replays the first collision: two producer
// processes that number their own events send six Enqueues for one
// domain, three of them with offsets the other took. Each colliding call
// must say so (ErrPayloadMismatch), never Enqueued, and every payload a
// call stored comes back; the producers then make the same calls with
// Append, and all six run.
func testTwoProducersNumbering(t *testing.T, s *Suite) {
	e := s.startPayloads(t)
	stored := map[int64]string{}
	for i := range int64(3) {
		for _, producer := range []string{"billing", "shipping"} {
			payload := fmt.Sprintf("%s event %d", producer, i)
			st, err := e.b.Enqueue(e.ctx, "user-7", i, []byte(payload))
			if producer == "billing" {
				mustNoError(t, err, "Enqueue of %q", payload)
				mustEqual(t, worklease.Enqueued, st, "Enqueue of %q", payload)
				stored[i] = payload
				continue
			}
			mustSentinel(t, worklease.ErrPayloadMismatch, err, "Enqueue of %q, over %q", payload, stored[i])
		}
	}
	for i := range int64(3) {
		c := e.claim(1, fmt.Sprintf("user-7/%d@1", i))[0]
		mustEqual(t, stored[i], string(c.Payload), "user-7/%d", i)
		e.succeed("user-7", c.Token)
	}

	var sent []string
	for i := range 3 {
		for _, producer := range []string{"billing", "shipping"} {
			payload := fmt.Sprintf("%s event %d", producer, i)
			mustEqual(t, worklease.Enqueued, e.append("user-8", []byte(payload), "").Status, "Append of %q", payload)
			sent = append(sent, payload)
		}
	}
	var ran []string
	for range 6 {
		cs := e.claimAny(1)
		mustEqual(t, 1, len(cs), "claims after %q", ran)
		ran = append(ran, string(cs[0].Payload))
		e.succeed("user-8", cs[0].Token)
	}
	mustEqual(t, sent, ran, "the payloads Append stored, in the order the calls took effect")
	e.check()
}

// testSequenceOutOfOrder replays the second collision: offsets taken from
// a database sequence, by producers whose transactions commit out of
// order, on a domain WithMonotonicOffsets (as for a Kafka partition).
// The later number, committed first, runs first; the earlier one, stored
// after it, counts as processed and never runs, and Enqueue says so
// (AlreadyProcessed, never Enqueued). With Append, the offsets are taken
// as the calls take effect, in commit order, and every event runs.
func testSequenceOutOfOrder(t *testing.T, s *Suite) {
	e := s.startPayloads(t, worklease.WithMonotonicOffsets())
	// Producer P1 took 1 and P2 took 2 from the sequence; P2 commits first.
	e.enqueue("acct", 2, []byte("P2"), worklease.Enqueued)
	e.succeed("acct", e.claim(1, "acct/2@1")[0].Token)
	e.enqueue("acct", 1, []byte("P1"), worklease.AlreadyProcessed) // lost, and said so
	// The same commits, with the offsets Append assigns as each takes effect.
	var ran []string
	for _, payload := range []string{"P2", "P1", "P4", "P3"} {
		res := e.append("acct-2", []byte(payload), "")
		mustEqual(t, worklease.Enqueued, res.Status, "Append of %q", payload)
	}
	for range 4 {
		cs := e.claimAny(1)
		mustEqual(t, 1, len(cs), "claims after %q", ran)
		ran = append(ran, string(cs[0].Payload))
		e.succeed("acct-2", cs[0].Token)
	}
	mustEqual(t, []string{"P2", "P1", "P4", "P3"}, ran, "every event, in commit order")
	e.check()
}

// testPayloadLimit: a payload up to the limit is stored, one byte more is
// refused by every producer's call, and nothing is stored.
func testPayloadLimit(t *testing.T, s *Suite) {
	e := s.startPayloads(t, worklease.WithMaxPayload(16))
	at := bytes.Repeat([]byte{'x'}, 16)
	over := bytes.Repeat([]byte{'x'}, 17)
	e.enqueue("A", 1, at, worklease.Enqueued)
	e.refused(worklease.ErrPayloadTooLarge, func() error { _, err := e.b.Enqueue(e.ctx, "B", 1, over); return err }, "B")
	e.refused(worklease.ErrPayloadTooLarge, func() error { _, err := e.b.EnqueueAt(e.ctx, "B", 1, over, epoch); return err }, "B")
	e.refused(worklease.ErrPayloadTooLarge, func() error {
		_, err := e.b.Append(e.ctx, "B", over, worklease.AppendOptions{Key: "k"})
		return err
	}, "B")
	e.refused(worklease.ErrPayloadTooLarge, func() error { _, err := e.b.Enqueue(e.ctx, "A", 1, over); return err })
	mustEqual(t, at, e.claim(1, "A/1@1")[0].Payload, "A/1's payload")

	d := s.startPayloads(t) // the default limit: 1 MiB
	big := bytes.Repeat([]byte{7}, worklease.DefaultMaxPayload)
	d.enqueue("A", 1, big, worklease.Enqueued)
	d.refused(worklease.ErrPayloadTooLarge, func() error {
		_, err := d.b.Enqueue(d.ctx, "A", 2, append(big, 7))
		return err
	})
	mustTrue(t, bytes.Equal(big, d.claim(1, "A/1@1")[0].Payload), "a payload of DefaultMaxPayload bytes comes back whole")
	e.check()
	d.check()
}

// testScheduled: an offset scheduled for later is claimed no earlier, and
// the offsets of its domain queued behind it wait with it; other domains
// do not. A schedule in the past is none.
func testScheduled(t *testing.T, s *Suite) {
	e := s.startPayloads(t)
	nine := epoch.Add(9 * time.Hour)
	mustEqual(t, worklease.Enqueued, e.enqueueAt("A", 1, []byte("at nine"), nine))
	e.enqueue("A", 2, nil, worklease.Enqueued)
	e.clk.Advance(time.Second)
	e.enqueue("B", 1, nil, worklease.Enqueued)
	e.succeed("B", e.claim(5, "B/1@1")[0].Token) // A waits
	e.clk.Advance(nine.Add(-time.Millisecond).Sub(e.clk.Now()))
	e.claim(5)
	e.clk.Advance(nine.Sub(e.clk.Now()))
	c := e.claim(5, "A/1@1")[0]
	mustEqual(t, []byte("at nine"), c.Payload, "A/1's payload")
	e.succeed("A", c.Token)
	e.succeed("A", e.claim(5, "A/2@1")[0].Token)
	mustEqual(t, worklease.Enqueued, e.enqueueAt("C", 1, nil, epoch)) // long past
	e.claim(5, "C/1@1")
	// Append's NotBefore schedules as EnqueueAt does.
	res, err := e.b.Append(e.ctx, "D", nil, worklease.AppendOptions{NotBefore: e.clk.Now().Add(time.Minute)})
	mustNoError(t, err, "Append with NotBefore")
	mustEqual(t, worklease.AppendResult{Offset: 0, Status: worklease.Enqueued}, res)
	e.claim(5)
	e.clk.Advance(time.Minute)
	e.claim(5, "D/0@1")
	e.check()
}

// testScheduledHoldsGrants: no call grants an offset scheduled for later,
// nor one queued behind it, nor, out of turn, before its time: TryAcquire
// queues, SucceedNext and FailNext hint, ClaimNext leases nothing, and the
// admin calls report no head.
func testScheduledHoldsGrants(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMaxRetries(0))
	later := epoch.Add(time.Hour)
	tok := e.acquire("A", 1, worklease.Acquired).Token
	mustEqual(t, worklease.Enqueued, e.enqueueAt("A", 2, nil, later))
	e.enqueue("A", 3, nil, worklease.Enqueued)
	res := e.succeedNext("A", tok)
	mustEqual(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, res, "SucceedNext onto a scheduled head")
	e.acquire("A", 2, worklease.Enqueued) // not before its time
	e.acquire("A", 3, worklease.Enqueued) // behind it
	e.acquire("A", 4, worklease.Enqueued) // and so is a new one
	mustEqual(t, worklease.DomainInfo{Backlog: []int64{2, 3, 4}, Processed: 1}, e.inspect("A"))
	mustEqual(t, worklease.Head{}, e.kill("A", 4, "not needed"), "Kill's head: none before its time")
	e.claim(5)
	e.clk.Advance(time.Hour)
	tok = e.acquire("A", 2, worklease.Acquired).Token
	e.succeed("A", tok)

	f := s.start(t, worklease.WithMaxRetries(0))
	tok = f.acquire("A", 1, worklease.Acquired).Token
	mustEqual(t, worklease.Enqueued, f.enqueueAt("A", 2, nil, later))
	fres := f.failNext("A", tok, nil)
	mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNextHint, Next: 2}, fres, "FailNext onto a scheduled head")
	f.enqueue("B", 1, nil, worklease.Enqueued)
	f.enqueueAt("B", 2, nil, later)
	next := f.claimNext(f.claim(1, "B/1@1")) // nothing next before its time
	mustEqual(t, 0, len(next), "ClaimNext onto a scheduled head")

	// Best effort grants an offset out of turn, but not before its time:
	// behind a head that is due, a scheduled offset asked for waits.
	g := s.start(t, worklease.WithBestEffortOrdering())
	g.enqueue("A", 1, nil, worklease.Enqueued)
	mustEqual(t, worklease.Enqueued, g.enqueueAt("A", 2, nil, later))
	g.acquire("A", 2, worklease.Enqueued) // out of turn, and not due
	mustEqual(t, worklease.DomainInfo{Backlog: []int64{1, 2}}, g.inspect("A"), "after asking for A/2 before its time")
	g.clk.Advance(time.Hour)
	g.succeed("A", g.acquire("A", 2, worklease.Acquired).Token) // out of turn, now due
	e.check()
	f.check()
	g.check()
}

// testScheduledRestart: a schedule survives a restart.
func testScheduledRestart(t *testing.T, s *Suite) {
	e := s.startPayloads(t)
	e.enqueueAt("A", 1, []byte("later"), epoch.Add(time.Hour))
	e.reopen()
	e.claim(5)
	e.clk.Advance(time.Hour)
	mustEqual(t, []byte("later"), e.claim(5, "A/1@1")[0].Payload, "A/1's payload after a restart")
	e.check()
}

// testScheduledBeforeRetryDelay: a domain waiting out a retry's delay
// waits for it whatever heads LIFO ordering puts in front of the retried
// offset: one scheduled to end earlier, or one not scheduled at all after
// one scheduled to end later. A claim may lease the domain's head from the
// later of the two ends.
func testScheduledBeforeRetryDelay(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithOrdering(worklease.LIFO), worklease.WithMaxRetries(3))
	e.enqueue("A", 1, nil, worklease.Enqueued)
	e.enqueue("B", 1, nil, worklease.Enqueued)
	cs := e.claim(2, "A/1@1", "B/1@1")
	e.retry("A", cs[0].Token, nil, 10*time.Second)
	e.retry("B", cs[1].Token, nil, 10*time.Second)
	mustEqual(t, worklease.Enqueued, e.enqueueAt("A", 2, nil, epoch.Add(5*time.Second)))
	mustEqual(t, worklease.Enqueued, e.enqueueAt("B", 2, nil, epoch.Add(20*time.Second)))
	e.enqueue("B", 3, nil, worklease.Enqueued) // not scheduled, but the delay holds
	e.clk.Advance(6 * time.Second)
	e.claim(5) // A/2's schedule ended; A's delay did not
	e.clk.Advance(4 * time.Second)
	// Both delays end at this instant, so the two are claimed in any order.
	names := claimNames(e.claimAny(5))
	slices.Sort(names)
	mustEqual(t, []string{"A/2@1", "B/3@1"}, names, "Claim(5)")
	e.check()
}

// testScheduledHeadReplaced: a domain waiting for its head's schedule is
// ready at once when LIFO ordering puts a head that is not scheduled in
// front, whichever call queues it, and ready when its new head is due if
// that head is scheduled to end sooner. Kill of a scheduled head makes the
// domain ready when the head behind it is due.
func testScheduledHeadReplaced(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithOrdering(worklease.LIFO))
	later := epoch.Add(time.Hour)
	for _, d := range []string{"A", "B", "C"} {
		mustEqual(t, worklease.Enqueued, e.enqueueAt(d, 1, nil, later))
	}
	e.enqueue("D", 1, nil, worklease.Enqueued)
	mustEqual(t, worklease.Enqueued, e.enqueueAt("D", 2, nil, later))
	e.claim(5)
	e.clk.Advance(time.Second)
	e.enqueue("A", 2, nil, worklease.Enqueued)
	e.claim(5, "A/2@1")
	e.clk.Advance(time.Second)
	e.acquire("B", 2, worklease.Enqueued) // TryAcquire queues while the head waits
	e.claim(5, "B/2@1")
	e.clk.Advance(time.Second)
	mustEqual(t, worklease.Enqueued, e.enqueueAt("C", 2, nil, e.clk.Now().Add(time.Minute)))
	e.claim(5)
	e.clk.Advance(time.Minute)
	e.claim(5, "C/2@1")
	mustEqual(t, worklease.Head{Next: 1, HasNext: true}, e.kill("D", 2, "not needed"), "Kill's head")
	e.claim(5, "D/1@1")
	e.check()
}

// testCancel: a cancelled offset, queued or scheduled, leaves the backlog
// and never runs; it counts as processed, not failed, and its payload
// goes. Cancel refuses what it cannot cancel, changing nothing.
func testCancel(t *testing.T, s *Suite) {
	e := s.startPayloads(t)
	e.enqueue("A", 1, []byte("one"), worklease.Enqueued)
	e.enqueue("A", 2, []byte("two"), worklease.Enqueued)
	e.enqueueAt("A", 3, []byte("three"), epoch.Add(time.Hour))
	mustEqual(t, worklease.Head{Next: 1, HasNext: true}, e.cancel("A", 2, false), "Cancel of a queued offset")
	e.enqueue("A", 2, []byte("two"), worklease.AlreadyProcessed)
	mustEqual(t, worklease.DomainInfo{Backlog: []int64{1, 3}, Processed: 1}, e.inspect("A"))
	tok := e.claim(5, "A/1@1")[0].Token
	e.refused(worklease.ErrInFlight, func() error { _, err := e.b.Cancel(e.ctx, "A", 1, false); return err })
	e.succeed("A", tok)
	e.cancel("A", 3, false) // scheduled
	e.clk.Advance(time.Hour)
	e.claim(5)
	mustEqual(t, worklease.DomainInfo{Processed: 3}, e.inspect("A"))
	e.refused(worklease.ErrAlreadyProcessed, func() error { _, err := e.b.Cancel(e.ctx, "A", 3, true); return err })
	e.refused(worklease.ErrNotQueued, func() error { _, err := e.b.Cancel(e.ctx, "A", 9, true); return err })
	e.refused(worklease.ErrNotQueued, func() error { _, err := e.b.Cancel(e.ctx, "nobody", 1, true); return err }, "nobody")
	e.kill("A", 5, "poison")
	e.refused(worklease.ErrNotQueued, func() error { _, err := e.b.Cancel(e.ctx, "A", 5, true); return err })
	mustEqual(t, 0, len(e.deadLetters("A"))-1, "a cancelled offset is no dead letter")
	st, err := e.b.Stats(e.ctx)
	mustNoError(t, err, "Stats")
	mustEqual(t, uint64(2), st.Cancelled, "Stats.Cancelled")
	// The head after a cancel of the head: the next offset, to acquire.
	e.enqueue("B", 1, nil, worklease.Enqueued)
	e.enqueue("B", 2, nil, worklease.Enqueued)
	mustEqual(t, worklease.Head{Next: 2, HasNext: true}, e.cancel("B", 1, false))
	e.check()
}

// testCancelInFlight: cancelling the offset in flight revokes its lease,
// whose holder is then refused, and the domain goes on with its next.
func testCancelInFlight(t *testing.T, s *Suite) {
	e := s.startPayloads(t)
	e.enqueue("A", 1, []byte("one"), worklease.Enqueued)
	e.enqueue("A", 2, nil, worklease.Enqueued)
	tok := e.claim(5, "A/1@1")[0].Token
	mustEqual(t, worklease.Head{Next: 2, HasNext: true}, e.cancel("A", 1, true))
	_, err := e.b.Succeed(e.ctx, "A", tok)
	mustSentinel(t, worklease.ErrLeaseRevoked, err, "Succeed of a cancelled offset")
	_, err = e.b.Extend(e.ctx, "A", tok, time.Second)
	mustSentinel(t, worklease.ErrLeaseRevoked, err, "Extend of a cancelled offset")
	e.succeed("A", e.claim(5, "A/2@1")[0].Token)
	mustEqual(t, worklease.DomainInfo{Processed: 2}, e.inspect("A"))
	mustEqual(t, 0, len(e.deadLetters("A")), "dead letters")
	e.check()
}

// testCancelEvents: a cancel is an event of its own.
func testCancelEvents(t *testing.T, s *Suite) {
	e := s.startObserved(t)
	e.enqueue("A", 1, nil, worklease.Enqueued)
	e.enqueue("A", 2, nil, worklease.Enqueued)
	tok := e.claim(5, "A/1@1")[0].Token
	e.cancel("A", 2, false)
	e.cancel("A", 1, true)
	evs := e.rec.of("A")
	mustEqual(t, []worklease.EventKind{worklease.EventEnqueued, worklease.EventEnqueued, worklease.EventAcquired,
		worklease.EventCancelled, worklease.EventCancelled}, e.rec.kinds("A"))
	mustEqual(t, int64(2), evs[3].Offset, "the first cancel's offset")
	mustZero(t, evs[3].Token, "a queued offset's cancel has no token")
	mustEqual(t, int64(1), evs[4].Offset, "the second cancel's offset")
	mustEqual(t, tok, evs[4].Token, "a cancel in flight names the lease it revoked")
	mustEqual(t, 1, evs[4].Attempt, "the cancelled lease's attempt")
}

// testProduceBadInput: each new call refuses bad input with its error,
// stores nothing, and leaves the other domains as they were.
func testProduceBadInput(t *testing.T, s *Suite) {
	e := s.startPayloads(t, worklease.WithMaxPayload(8))
	e.enqueue("other", 1, []byte("keep"), worklease.Enqueued)
	longKey := strings.Repeat("k", worklease.MaxKeyLen+1)
	long := strings.Repeat("d", worklease.MaxDomainLen+1)
	for _, c := range []struct {
		name string
		want error
		call func() error
	}{
		{"EnqueueAtNegative", worklease.ErrInvalidOffset, func() error { _, err := e.b.EnqueueAt(e.ctx, "A", -1, nil, epoch); return err }},
		{"EnqueueAtEmptyDomain", worklease.ErrInvalidDomain, func() error { _, err := e.b.EnqueueAt(e.ctx, "", 1, nil, epoch); return err }},
		{"EnqueueAtTooLarge", worklease.ErrPayloadTooLarge, func() error {
			_, err := e.b.EnqueueAt(e.ctx, "A", 1, make([]byte, 9), epoch)
			return err
		}},
		{"AppendLongDomain", worklease.ErrInvalidDomain, func() error {
			_, err := e.b.Append(e.ctx, long, nil, worklease.AppendOptions{})
			return err
		}},
		{"AppendTooLarge", worklease.ErrPayloadTooLarge, func() error {
			_, err := e.b.Append(e.ctx, "A", make([]byte, 9), worklease.AppendOptions{})
			return err
		}},
		{"AppendLongKey", worklease.ErrInvalidKey, func() error {
			_, err := e.b.Append(e.ctx, "A", nil, worklease.AppendOptions{Key: longKey})
			return err
		}},
		{"CancelNegative", worklease.ErrInvalidOffset, func() error { _, err := e.b.Cancel(e.ctx, "A", -1, true); return err }},
		{"CancelEmptyDomain", worklease.ErrInvalidDomain, func() error { _, err := e.b.Cancel(e.ctx, "", 1, true); return err }},
	} {
		e.refused(c.want, c.call, "A")
	}
	mustEqual(t, worklease.AppendResult{Offset: 0, Status: worklease.Enqueued},
		e.append("A", nil, strings.Repeat("k", worklease.MaxKeyLen)), "a key of MaxKeyLen bytes")
	mustEqual(t, []byte("keep"), e.claim(5, "other/1@1", "A/0@1")[0].Payload, "the other domain's payload")
	e.check()
}

// testPayloadsRestart: every payload comes back byte for byte after a
// restart until its offset succeeds: queued, in flight, retried and dead
// letters, which keep theirs for Redrive.
func testPayloadsRestart(t *testing.T, s *Suite) {
	e := s.startPayloads(t, worklease.WithMaxRetries(1), worklease.WithLeaseTTL(time.Minute))
	want := map[string][]byte{"q": []byte("queued"), "f": {0, 1, 255}, "l": []byte("leased"), "e": {}}
	for _, d := range []string{"f", "l"} {
		e.enqueue(d, 1, want[d], worklease.Enqueued)
	}
	e.clk.Advance(time.Millisecond)
	for _, d := range []string{"q", "e"} {
		e.enqueue(d, 1, want[d], worklease.Enqueued)
	}
	e.claim(2, "f/1@1", "l/1@1")
	e.kill("f", 1, "poison") // in flight: a dead letter
	e.reopen()
	dl, err := e.b.InspectDeadLetter(e.ctx, "f", 1)
	mustNoError(t, err, "InspectDeadLetter")
	mustEqual(t, want["f"], dl.Payload, "the dead letter's payload after a restart")
	e.redrive("f", 1)
	e.clk.Advance(time.Minute) // l's lease is taken over
	got := map[string][]byte{}
	for _, c := range e.claimAny(5) {
		got[c.Domain] = c.Payload
		e.succeed(c.Domain, c.Token)
	}
	mustEqual(t, want, got, "the payloads after a restart")
	e.check()
}

func (e *env) append(d string, payload []byte, key string) worklease.AppendResult {
	e.t.Helper()
	res, err := e.b.Append(e.ctx, d, payload, worklease.AppendOptions{Key: key})
	mustNoError(e.t, err, "Append(%q, %q, %q)", d, payload, key)
	return res
}

func (e *env) enqueueAt(d string, off int64, payload []byte, at time.Time) worklease.AcquireStatus {
	e.t.Helper()
	st, err := e.b.EnqueueAt(e.ctx, d, off, payload, at)
	mustNoError(e.t, err, "EnqueueAt(%q, %d, %v)", d, off, at)
	return st
}

func (e *env) cancel(d string, off int64, inFlight bool) worklease.Head {
	e.t.Helper()
	h, err := e.b.Cancel(e.ctx, d, off, inFlight)
	mustNoError(e.t, err, "Cancel(%q, %d, %t)", d, off, inFlight)
	return h
}
