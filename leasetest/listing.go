package leasetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/worklease/worklease"
)

// testListing is the Listing area: the paged listings (ListDomains,
// ListLeases, ListDeadLetters), InspectDeadLetter, Stats and Totals.
func testListing(t *testing.T, s *Suite) {
	runCases(t, s, []testCase{
		{"DomainsByState", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(0))
			e.acquire("leased", 1, worklease.Acquired)
			e.acquire("backlogged", 1, worklease.Acquired)
			e.acquire("backlogged", 2, worklease.Enqueued)
			e.acquire("backlogged", 3, worklease.Enqueued)
			e.pause("paused")
			e.kill("dead", 4, "poison")
			e.kill("parked", 5, "poison")
			e.pause("parked")
			e.process("idle", 1)
			all := []string{"backlogged", "dead", "idle", "leased", "parked", "paused"}
			for _, c := range []struct {
				state worklease.DomainState
				want  []string
			}{
				{0, all},
				{worklease.DomainLeased, []string{"backlogged", "leased"}},
				{worklease.DomainPaused, []string{"parked", "paused"}},
				{worklease.DomainParked, []string{"parked"}},
				{worklease.DomainDeadLettered, []string{"dead", "parked"}},
				{worklease.DomainBacklogged, []string{"backlogged"}},
				{worklease.DomainLeased | worklease.DomainBacklogged, []string{"backlogged"}},
				{worklease.DomainLeased | worklease.DomainPaused, nil},
			} {
				for _, limit := range []int{0, 1, 2} {
					got := e.listDomains(worklease.DomainQuery{State: c.state, Limit: limit})
					mustEqual(t, c.want, sortedNames(got), "ListDomains(%v) by pages of %d", c.state, limit)
				}
			}
			page, err := e.b.ListDomains(e.ctx, worklease.DomainQuery{State: worklease.DomainBacklogged})
			mustNoError(t, err, "ListDomains")
			mustLen(t, page.Domains, 1)
			d := page.Domains[0]
			mustEqual(t, worklease.DomainSummary{
				Domain: "backlogged", Leased: true, Lease: e.inspect("backlogged").Lease, Queued: 2, Head: 2,
			}, d, "the backlogged domain's summary")
			mustEqual(t, worklease.DomainLeased|worklease.DomainBacklogged, d.State())
			page, err = e.b.ListDomains(e.ctx, worklease.DomainQuery{State: worklease.DomainParked})
			mustNoError(t, err, "ListDomains")
			mustEqual(t, []worklease.DomainSummary{{Domain: "parked", Paused: true, DeadLetters: 1}}, page.Domains)
		}},
		{"DomainsByPrefix", func(t *testing.T, s *Suite) {
			e := s.start(t)
			names := []string{"a", "ab", "abc", "abd", "b", "a\xff", "a\xff\xff", "\xff", "\xffa"}
			for _, d := range names {
				e.pause(d)
			}
			for _, c := range []struct {
				prefix string
				want   []string
			}{
				{"", names},
				{"a", []string{"a", "ab", "abc", "abd", "a\xff", "a\xff\xff"}},
				{"ab", []string{"ab", "abc", "abd"}},
				{"a\xff", []string{"a\xff", "a\xff\xff"}},
				{"\xff", []string{"\xff", "\xffa"}},
				{"abcd", nil},
			} {
				got := e.listDomains(worklease.DomainQuery{Prefix: c.prefix, Limit: 2})
				want := slices.Clone(c.want)
				slices.Sort(want)
				mustEqual(t, want, sortedNames(got), "ListDomains with prefix %q", c.prefix)
			}
		}},
		{"DomainsWhileTheyChange", func(t *testing.T, s *Suite) {
			e := s.start(t)
			const n = 120
			for i := range n {
				e.process(fmt.Sprintf("k%03d", i), 1)
			}
			seen := map[string]int{}
			forgotten := map[string]bool{}
			q := worklease.DomainQuery{Limit: 7}
			for page := 0; ; page++ {
				p, err := e.b.ListDomains(e.ctx, q)
				mustNoError(t, err, "ListDomains page %d", page)
				for _, d := range p.Domains {
					seen[d.Domain]++
				}
				if p.Next == "" {
					break
				}
				mustTrue(t, page < 10*n, "ListDomains does not end")
				q.After = p.Next
				// Between pages: new domains, and some old ones forgotten.
				e.process(fmt.Sprintf("new%03d", page), 1)
				victim := fmt.Sprintf("k%03d", (page*37)%n)
				if !forgotten[victim] {
					e.forget(victim)
					forgotten[victim] = true
				}
			}
			for name, times := range seen {
				mustEqual(t, 1, times, "domain %q listed %d times", name, times)
			}
			for i := range n {
				if d := fmt.Sprintf("k%03d", i); !forgotten[d] {
					mustEqual(t, 1, seen[d], "domain %q, there all along, listed %d times", d, seen[d])
				}
			}
		}},
		{"LeasesSoonestFirst", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(time.Minute))
			toks := map[string]worklease.Token{}
			for i := range 9 {
				d := fmt.Sprintf("d%d", (i*5)%9) // granted out of name order
				toks[d] = e.acquire(d, 1, worklease.Acquired).Token
				e.clk.Advance(time.Second)
			}
			e.extend("d0", toks["d0"], 10*time.Minute) // now last
			e.process("done", 1)                       // no lease
			var got []worklease.LeaseInfo
			q := worklease.LeaseQuery{Limit: 2}
			for {
				p, err := e.b.ListLeases(e.ctx, q)
				mustNoError(t, err, "ListLeases")
				got = append(got, p.Leases...)
				if p.Next == "" {
					break
				}
				q.After = p.Next
			}
			mustLen(t, got, 9)
			want := e.leases() // by domain
			slices.SortFunc(want, func(a, b worklease.LeaseInfo) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
			mustEqual(t, want, got, "leases, the soonest to expire first")
			mustEqual(t, "d0", got[8].Domain, "the extended lease comes last")
		}},
		{"LeasesWithoutExpiry", func(t *testing.T, s *Suite) {
			e := s.start(t)
			for i := range 5 {
				e.acquire(fmt.Sprintf("d%d", i), 1, worklease.Acquired)
			}
			e.pause("idle")
			got := e.listLeases(2)
			slices.SortFunc(got, func(a, b worklease.LeaseInfo) int { return strings.Compare(a.Domain, b.Domain) })
			mustEqual(t, e.leases(), got)
		}},
		{"DeadLetters", func(t *testing.T, s *Suite) {
			e := s.start(t)
			var want []worklease.DeadLetter
			for i := range 4 {
				d := fmt.Sprintf("d%d", i)
				for off := int64(5); off >= 1; off -= 2 { // 5, 3, 1
					e.kill(d, off, fmt.Sprintf("%s/%d", d, off))
					want = append(want, e.deadLetterOf(d, off))
					e.clk.Advance(time.Second)
				}
			}
			e.pause("clean")
			for _, limit := range []int{1, 2, 5, 0} {
				got := e.listDeadLetters(worklease.DeadLetterQuery{Limit: limit})
				mustLen(t, got, len(want), "by domain, pages of %d", limit)
				// Domain by domain, each one's in order of offsets.
				var domains []string
				for i, dl := range got {
					if i == 0 || got[i-1].Domain != dl.Domain {
						mustFalse(t, slices.Contains(domains, dl.Domain), "domain %q listed in two runs", dl.Domain)
						domains = append(domains, dl.Domain)
					} else {
						mustGreater(t, dl.Offset, got[i-1].Offset, "offsets of %q in order", dl.Domain)
					}
				}
				mustEqual(t, sortedDeadLetters(want), sortedDeadLetters(got), "by domain, pages of %d", limit)

				got = e.listDeadLetters(worklease.DeadLetterQuery{Order: worklease.DeadLettersNewestFirst, Limit: limit})
				newest := slices.Clone(want)
				slices.Reverse(newest)
				mustEqual(t, newest, got, "newest first, pages of %d", limit)

				got = e.listDeadLetters(worklease.DeadLetterQuery{Domain: "d2", Limit: limit})
				mustEqual(t, []int64{1, 3, 5}, offsetsOf(got), "d2's, pages of %d", limit)
			}
			mustEqual(t, 0, len(e.listDeadLetters(worklease.DeadLetterQuery{Domain: "clean"})), "a domain with none")
			mustEqual(t, 0, len(e.listDeadLetters(worklease.DeadLetterQuery{Domain: "unknown"})), "an unknown domain")
			_, err := e.b.InspectDeadLetter(e.ctx, "d1", 2)
			mustSentinel(t, worklease.ErrNotDeadLettered, err, "InspectDeadLetter of an offset not failed")
			_, err = e.b.InspectDeadLetter(e.ctx, "unknown", 2)
			mustSentinel(t, worklease.ErrNotDeadLettered, err, "InspectDeadLetter on an unknown domain")
		}},
		{"DeadLetterPayloads", func(t *testing.T, s *Suite) {
			e := s.startPayloads(t, worklease.WithMaxRetries(0))
			e.enqueue("A", 1, []byte("one\x00\xff"), worklease.Enqueued)
			e.enqueue("A", 2, nil, worklease.Enqueued)
			c := e.claim(1, "A/1@1")[0]
			e.retry("A", c.Token, errors.New("boom"), 0)
			e.kill("A", 2, "")
			dl, err := e.b.InspectDeadLetter(e.ctx, "A", 1)
			mustNoError(t, err, "InspectDeadLetter")
			mustEqual(t, []byte("one\x00\xff"), dl.Payload)
			mustEqual(t, "boom", dl.Cause.Error())
			got := e.listDeadLetters(worklease.DeadLetterQuery{Domain: "A", Payloads: true})
			mustLen(t, got, 2)
			mustEqual(t, []byte("one\x00\xff"), got[0].Payload)
			mustTrue(t, got[1].Payload == nil, "A/2 was stored without a payload")
			got = e.listDeadLetters(worklease.DeadLetterQuery{})
			mustTrue(t, got[0].Payload == nil, "payloads only when asked")
			got[0].Payload = append(got[0].Payload, 1)
			dl.Payload[0] = 'X' // the caller's copy
			dl, _ = e.b.InspectDeadLetter(e.ctx, "A", 1)
			mustEqual(t, []byte("one\x00\xff"), dl.Payload, "the payload, after the caller changed its copy")
		}},
		{"BadQueries", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(time.Minute))
			for i := range 5 {
				e.acquire(fmt.Sprintf("d%d", i), 1, worklease.Acquired)
				e.kill(fmt.Sprintf("d%d", i), 7, "")
			}
			domains, err := e.b.ListDomains(e.ctx, worklease.DomainQuery{Limit: 1})
			mustNoError(t, err, "ListDomains")
			leases, err := e.b.ListLeases(e.ctx, worklease.LeaseQuery{Limit: 1})
			mustNoError(t, err, "ListLeases")
			mustTrue(t, domains.Next != "" && leases.Next != "", "more pages")
			for _, c := range []string{"!", "AAAA", "not a cursor", leases.Next, domains.Next + "x", domains.Next[:len(domains.Next)/2]} {
				if c == domains.Next {
					continue
				}
				_, err := e.b.ListDomains(e.ctx, worklease.DomainQuery{After: c})
				mustSentinel(t, worklease.ErrInvalidCursor, err, "ListDomains after %q", c)
				var qe *worklease.QueryError
				mustTrue(t, errors.As(err, &qe) && qe.Op == "ListDomains", "a *QueryError of ListDomains: %v", err)
			}
			for _, c := range []string{"!", domains.Next} {
				_, err := e.b.ListLeases(e.ctx, worklease.LeaseQuery{After: c})
				mustSentinel(t, worklease.ErrInvalidCursor, err, "ListLeases after %q", c)
				_, err = e.b.ListDeadLetters(e.ctx, worklease.DeadLetterQuery{After: c})
				mustSentinel(t, worklease.ErrInvalidCursor, err, "ListDeadLetters after %q", c)
				_, err = e.b.ListDeadLetters(e.ctx, worklease.DeadLetterQuery{After: c, Order: worklease.DeadLettersNewestFirst})
				mustSentinel(t, worklease.ErrInvalidCursor, err, "ListDeadLetters newest first after %q", c)
				_, err = e.b.ListDeadLetters(e.ctx, worklease.DeadLetterQuery{After: c, Domain: "d1"})
				mustSentinel(t, worklease.ErrInvalidCursor, err, "ListDeadLetters of d1 after %q", c)
			}
			for _, limit := range []int{-1, worklease.MaxPageLimit + 1, math.MaxInt} {
				_, err := e.b.ListDomains(e.ctx, worklease.DomainQuery{Limit: limit})
				mustSentinel(t, worklease.ErrInvalidLimit, err, "ListDomains limit %d", limit)
				_, err = e.b.ListLeases(e.ctx, worklease.LeaseQuery{Limit: limit})
				mustSentinel(t, worklease.ErrInvalidLimit, err, "ListLeases limit %d", limit)
				_, err = e.b.ListDeadLetters(e.ctx, worklease.DeadLetterQuery{Limit: limit})
				mustSentinel(t, worklease.ErrInvalidLimit, err, "ListDeadLetters limit %d", limit)
			}
			_, err = e.b.ListDeadLetters(e.ctx, worklease.DeadLetterQuery{Domain: tooLongDomain})
			mustSentinel(t, worklease.ErrInvalidDomain, err, "ListDeadLetters of a domain too long")
			_, err = e.b.InspectDeadLetter(e.ctx, "d1", -1)
			mustSentinel(t, worklease.ErrInvalidOffset, err, "InspectDeadLetter of a negative offset")
			p, err := e.b.ListDomains(e.ctx, worklease.DomainQuery{Limit: worklease.MaxPageLimit})
			mustNoError(t, err, "ListDomains with the largest limit")
			mustLen(t, p.Domains, 5)
		}},
		{"TotalsAndStats", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(0))
			e.acquire("A", 1, worklease.Acquired)
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 3, worklease.Enqueued)
			e.kill("B", 1, "")
			e.kill("B", 2, "")
			e.pause("C")
			e.process("D", 1)
			tot, err := e.b.Totals(e.ctx)
			mustNoError(t, err, "Totals")
			mustEqual(t, worklease.Totals{Domains: 4, Leased: 1, Paused: 1, Queued: 2, DeadLetters: 2}, tot)
			st, err := e.b.Stats(e.ctx)
			mustNoError(t, err, "Stats")
			mustEqual(t, uint64(2), st.Acquired, "Stats.Acquired")
			mustEqual(t, uint64(1), st.Processed, "Stats.Processed")
			mustEqual(t, uint64(2), st.Killed, "Stats.Killed")
		}},
		{"Model", func(t *testing.T, s *Suite) { rapid.Check(t, func(rt *rapid.T) { listingModel(t, rt, s) }) }},
	})
}

// listingModel pages through the domains, leases and dead letters with a
// random query while random calls change the backend between pages, and
// checks that every item that was there and matched for the whole listing
// is listed exactly once, that no item is listed twice, and that each item
// listed matched the query when its page was read.
func listingModel(t *testing.T, rt *rapid.T, s *Suite) {
	clk := NewClock(epoch)
	opts := []worklease.Option{worklease.WithClock(clk), worklease.WithMaxRetries(0), worklease.WithLeaseTTL(time.Hour)}
	b := s.New(t, opts...)
	check(rt, b != nil, "leasetest: Suite.New returned nil")
	rt.Cleanup(func() { b.Close() })
	e := &env{t: t, s: s, clk: clk, b: b, ctx: context.Background(), opts: opts}
	names := []string{"a", "ab", "b", "ba", "c", "\xff", "<x>"}
	domain := rapid.SampledFrom(names)
	offset := rapid.Int64Range(1, 4)
	tokens := map[string]worklease.Token{}
	// change makes one random call; errors (a refused call) change
	// nothing and are ignored.
	change := func() {
		d := domain.Draw(rt, "domain")
		switch rapid.IntRange(0, 6).Draw(rt, "call") {
		case 0:
			if res, err := e.b.TryAcquire(e.ctx, d, offset.Draw(rt, "offset")); err == nil && res.Status == worklease.Acquired {
				tokens[d] = res.Token
			}
		case 1:
			_, _ = e.b.Succeed(e.ctx, d, tokens[d])
		case 2:
			_, _ = e.b.Kill(e.ctx, d, offset.Draw(rt, "offset"), "k")
		case 3:
			_ = e.b.Pause(e.ctx, d)
		case 4:
			_, _ = e.b.Resume(e.ctx, d)
		case 5:
			_, _ = e.b.Redrive(e.ctx, d, offset.Draw(rt, "offset"))
		case 6:
			_ = e.b.Forget(e.ctx, d)
		}
		e.clk.Advance(time.Duration(rapid.IntRange(0, 3).Draw(rt, "seconds")) * time.Second)
	}
	for range rapid.IntRange(0, 20).Draw(rt, "setup") {
		change()
	}
	limit := rapid.IntRange(1, 3).Draw(rt, "limit")
	state := rapid.SampledFrom(append(worklease.DomainStates(), 0)).Draw(rt, "state")
	prefix := rapid.SampledFrom([]string{"", "a", "b", "\xff"}).Draw(rt, "prefix")

	// Domains: which match before, and which match at the end.
	matching := func() map[string]bool {
		out := map[string]bool{}
		for _, d := range e.listDomains(worklease.DomainQuery{Prefix: prefix, State: state, Limit: worklease.MaxPageLimit}) {
			out[d.Domain] = true
		}
		return out
	}
	before, seen, touched := matching(), map[string]int{}, map[string]bool{}
	q := worklease.DomainQuery{Prefix: prefix, State: state, Limit: limit}
	for n := 0; ; n++ {
		p, err := e.b.ListDomains(e.ctx, q)
		mustNoError(rt, err, "ListDomains")
		mustTrue(rt, len(p.Domains) <= limit, "a page of %d with limit %d", len(p.Domains), limit)
		for _, d := range p.Domains {
			seen[d.Domain]++
			mustTrue(rt, strings.HasPrefix(d.Domain, prefix) && d.State()&state == state, "%q listed for %q, %v", d.Domain, prefix, state)
			info := e.inspect(d.Domain)
			mustEqual(rt, info.Leased, d.Leased, "%q leased", d.Domain)
			mustEqual(rt, info.Paused, d.Paused, "%q paused", d.Domain)
			mustEqual(rt, int64(len(info.Backlog)), d.Queued, "%q queued", d.Domain)
			mustEqual(rt, info.Failed, d.DeadLetters, "%q dead letters", d.Domain)
		}
		if p.Next == "" {
			break
		}
		mustTrue(rt, n < 1000, "ListDomains does not end")
		q.After = p.Next
		if rapid.Bool().Draw(rt, "change between pages") {
			d := domain.Draw(rt, "touched")
			touched[d] = true
			// Touch only d: stand in for change on one domain.
			switch rapid.IntRange(0, 2).Draw(rt, "how") {
			case 0:
				_ = e.b.Pause(e.ctx, d)
			case 1:
				_, _ = e.b.Kill(e.ctx, d, offset.Draw(rt, "offset"), "k")
			case 2:
				_ = e.b.Forget(e.ctx, d)
			}
		}
	}
	after := matching()
	for d, times := range seen {
		mustEqual(rt, 1, times, "%q listed %d times", d, times)
	}
	for d := range before {
		if after[d] && !touched[d] {
			mustEqual(rt, 1, seen[d], "%q, matching all along, listed %d times", d, seen[d])
		}
	}

	// Dead letters, by domain or newest first, while more fail.
	order := rapid.SampledFrom([]worklease.DeadLetterOrder{worklease.DeadLettersByDomain, worklease.DeadLettersNewestFirst}).Draw(rt, "order")
	key := func(dl worklease.DeadLetter) string { return fmt.Sprintf("%q/%d", dl.Domain, dl.Offset) }
	all := e.listDeadLetters(worklease.DeadLetterQuery{Order: order, Limit: worklease.MaxPageLimit})
	dlSeen := map[string]int{}
	dq := worklease.DeadLetterQuery{Order: order, Limit: limit}
	var prev *worklease.DeadLetter
	for n := 0; ; n++ {
		p, err := e.b.ListDeadLetters(e.ctx, dq)
		mustNoError(rt, err, "ListDeadLetters")
		for _, dl := range p.DeadLetters {
			dlSeen[key(dl)]++
			if order == worklease.DeadLettersNewestFirst && prev != nil {
				mustFalse(rt, dl.At.After(prev.At), "%s after %s, newest first", key(dl), key(*prev))
			}
			prev = &dl
		}
		if p.Next == "" {
			break
		}
		mustTrue(rt, n < 1000, "ListDeadLetters does not end")
		dq.After = p.Next
		if rapid.Bool().Draw(rt, "kill between pages") {
			_, _ = e.b.Kill(e.ctx, domain.Draw(rt, "domain"), rapid.Int64Range(10, 20).Draw(rt, "offset"), "later")
		}
	}
	for k, times := range dlSeen {
		mustEqual(rt, 1, times, "dead letter %s listed %d times", k, times)
	}
	for _, dl := range all {
		mustEqual(rt, 1, dlSeen[key(dl)], "dead letter %s, there all along, listed %d times", key(dl), dlSeen[key(dl)])
	}
}

// listDomains returns every domain q matches, following its pages.
func (e *env) listDomains(q worklease.DomainQuery) []worklease.DomainSummary {
	e.t.Helper()
	var out []worklease.DomainSummary
	for n := 0; ; n++ {
		p, err := e.b.ListDomains(e.ctx, q)
		mustNoError(e.t, err, "ListDomains(%+v)", q)
		out = append(out, p.Domains...)
		if p.Next == "" {
			return out
		}
		mustTrue(e.t, n < 100_000, "ListDomains does not end")
		q.After = p.Next
	}
}

// listLeases returns every lease, following pages of limit.
func (e *env) listLeases(limit int) []worklease.LeaseInfo {
	e.t.Helper()
	var out []worklease.LeaseInfo
	q := worklease.LeaseQuery{Limit: limit}
	for n := 0; ; n++ {
		p, err := e.b.ListLeases(e.ctx, q)
		mustNoError(e.t, err, "ListLeases")
		out = append(out, p.Leases...)
		if p.Next == "" {
			return out
		}
		mustTrue(e.t, n < 100_000, "ListLeases does not end")
		q.After = p.Next
	}
}

// listDeadLetters returns every dead letter q matches, following its
// pages.
func (e *env) listDeadLetters(q worklease.DeadLetterQuery) []worklease.DeadLetter {
	e.t.Helper()
	var out []worklease.DeadLetter
	for n := 0; ; n++ {
		p, err := e.b.ListDeadLetters(e.ctx, q)
		mustNoError(e.t, err, "ListDeadLetters(%+v)", q)
		out = append(out, p.DeadLetters...)
		if p.Next == "" {
			return out
		}
		mustTrue(e.t, n < 100_000, "ListDeadLetters does not end")
		q.After = p.Next
	}
}

// deadLetterOf returns offset's dead letter in d, as DeadLetters lists it.
func (e *env) deadLetterOf(d string, offset int64) worklease.DeadLetter {
	e.t.Helper()
	for _, dl := range e.deadLetters(d) {
		if dl.Offset == offset {
			return dl
		}
	}
	e.t.Fatalf("no dead letter %q/%d", d, offset)
	return worklease.DeadLetter{}
}

func sortedNames(ds []worklease.DomainSummary) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Domain)
	}
	slices.Sort(out)
	return out
}

func sortedDeadLetters(dls []worklease.DeadLetter) []worklease.DeadLetter {
	out := slices.Clone(dls)
	slices.SortFunc(out, func(a, b worklease.DeadLetter) int {
		if c := strings.Compare(a.Domain, b.Domain); c != 0 {
			return c
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

func offsetsOf(dls []worklease.DeadLetter) []int64 {
	var out []int64
	for _, dl := range dls {
		out = append(out, dl.Offset)
	}
	return out
}
