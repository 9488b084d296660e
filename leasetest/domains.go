package leasetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/worklease/worklease"
)

// The longest domains: a domain is any 1 to MaxDomainLen bytes, and a
// backend must take each of them in every call, including those that
// neither compress (as repeated bytes would, which an index that
// compresses its keys takes whole) nor are UTF-8 (as a column of text
// would refuse).

// longShared is how many first bytes the long domains share: more than
// half of them, so that a backend that orders or indexes domains by their
// first bytes must tell them apart by the rest.
const longShared = 3 * worklease.MaxDomainLen / 4

// longDomain returns the i-th long domain (i at most 255): MaxDomainLen
// pseudo-random bytes, the first longShared of them the same in every
// one, the next one i, and the first one 0xff, which is never in UTF-8.
// They sort in the order of i.
func longDomain(i int) string {
	b := make([]byte, worklease.MaxDomainLen)
	fill := func(b []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0x10ad))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
	}
	fill(b[:longShared], 0)
	fill(b[longShared:], uint64(i)+1)
	b[0], b[longShared] = 0xff, byte(i)
	return string(b)
}

// tooLongDomain is one byte too long for a domain, and otherwise as the
// long domains are.
var tooLongDomain = longDomain(0) + "x"

// errorName is how an error names domain, in every backend: quoted whole
// if it is short, else its first 64 bytes at most (not splitting a rune
// of UTF-8), quoted, and its length, so that a long domain never makes a
// long error.
func errorName(domain string) string {
	const show = 64
	if len(domain) <= show {
		return fmt.Sprintf("%q", domain)
	}
	n := show
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(domain[n]); i++ {
		n--
	}
	return fmt.Sprintf("%q… (%d bytes)", domain[:n], len(domain))
}

// maxErrorLen is the longest error a call on a long domain may return.
const maxErrorLen = 512

// testDomains is the Domains area: the longest domains in every call, and
// how errors name a domain.
func testDomains(t *testing.T, s *Suite) {
	runCases(t, s, []testCase{
		{"LongestInEveryCall", testLongestDomains},
		{"ErrorsNameTheDomain", func(t *testing.T, s *Suite) {
			e := s.start(t)
			for _, c := range domainCalls {
				for _, d := range []string{"", tooLongDomain} {
					err := c.call(e.ctx, e.b, d, 1)
					mustSentinel(t, worklease.ErrInvalidDomain, err, "%s with a domain of %d bytes", c.name, len(d))
					text := err.Error()
					mustTrue(t, strings.Contains(text, errorName(d)) && len(text) <= maxErrorLen,
						"%s's error names the domain of %d bytes as %s, within %d bytes: %s", c.name, len(d), errorName(d), maxErrorLen, text)
				}
			}
			// A long domain in an error of the contract's.
			d := longDomain(0)
			_, err := e.b.Succeed(e.ctx, d, worklease.Token{})
			mustSentinel(t, worklease.ErrNoLease, err, "Succeed on a long domain nobody holds")
			mustTrue(t, strings.Contains(err.Error(), errorName(d)) && len(err.Error()) <= maxErrorLen,
				"Succeed's error names the domain as %s, within %d bytes: %s", errorName(d), maxErrorLen, err)
		}},
	})
}

// testLongestDomains makes every call of the Backend on three long
// domains, a, b and c, in the order of their bytes, and checks what each
// returns, as the other areas check it of short domains.
func testLongestDomains(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(1))
	a, b, c := longDomain(0), longDomain(1), longDomain(2)
	payload := func(p string) []byte {
		if !s.Payloads {
			return nil
		}
		return []byte(p)
	}

	// The contract's calls, and the operators'.
	tok := e.acquire(a, 1, worklease.Acquired).Token
	e.acquire(a, 1, worklease.AlreadyAcquired)
	e.acquire(a, 2, worklease.Enqueued)
	mustTrue(t, e.extend(a, tok, 2*time.Minute).Equal(epoch.Add(2*time.Minute)), "Extend")
	res := e.succeedNext(a, tok)
	mustEqual(t, worklease.NextAcquired, res.Status, "SucceedNext")
	mustEqual(t, int64(2), res.Lease.Offset, "SucceedNext's lease")
	fres := e.fail(a, res.Lease.Token, errors.New("flaky"))
	mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 1}, fres, "Fail")
	fres = e.failNext(a, res.Lease.Token, errors.New("poison"))
	mustEqual(t, worklease.GiveUpNoBacklog, fres.Status, "FailNext")
	mustEqual(t, []worklease.DeadLetter{{Domain: a, Offset: 2, Cause: errors.New("poison"), Attempts: 2, At: epoch}}, e.deadLetters(a))
	mustEqual(t, worklease.Head{Next: 2, HasNext: true}, e.redrive(a, 2), "Redrive")
	e.acquire(a, 2, worklease.Acquired)
	mustEqual(t, worklease.Head{Next: 2, HasNext: true}, e.forceRelease(a), "ForceRelease")
	mustEqual(t, worklease.Head{}, e.kill(a, 2, "gone"), "Kill")
	mustEqual(t, worklease.DomainInfo{Processed: 1, Failed: 1}, e.inspect(a))

	e.pause(b)
	mustEqual(t, worklease.DomainInfo{Paused: true}, e.inspect(b))
	mustEqual(t, worklease.Head{}, e.resume(b), "Resume")
	e.forget(b)
	mustEqual(t, []string{a}, e.domains())

	tok = e.acquire(c, 1, worklease.Acquired).Token
	e.clk.Advance(time.Minute)
	exps := e.reap()
	mustEqual(t, 1, len(exps), "Reap's expiries")
	mustTrue(t, exps[0].Domain == c && exps[0].Offset == 1 && exps[0].Token == tok, "Reap expired %.20q/%d", exps[0].Domain, exps[0].Offset)
	e.succeed(c, e.acquire(c, 1, worklease.Acquired).Token)
	mustEqual(t, worklease.DomainInfo{Processed: 1}, e.inspect(c))

	// The pull calls: a and c claimed together, a's next offset claimed
	// with ClaimNext, c's retried until it is a dead letter.
	e.enqueue(a, 3, payload("a3"), worklease.Enqueued)
	e.enqueue(a, 3, payload("a3"), worklease.AlreadyQueued)
	e.enqueue(a, 4, payload("a4"), worklease.Enqueued)
	e.clk.Advance(time.Millisecond)
	e.enqueue(c, 2, payload("c2"), worklease.Enqueued)
	e.clk.Advance(time.Millisecond)
	cs := e.claimAny(10)
	mustEqual(t, 2, len(cs), "claims")
	mustTrue(t, cs[0].Domain == a && cs[0].Offset == 3 && cs[1].Domain == c && cs[1].Offset == 2, "claimed %.20q/%d and %.20q/%d",
		cs[0].Domain, cs[0].Offset, cs[1].Domain, cs[1].Offset)
	mustEqual(t, payload("a3"), cs[0].Payload, "a/3's payload")
	mustEqual(t, payload("c2"), cs[1].Payload, "c/2's payload")
	_, errs, err := e.b.ExtendMany(e.ctx, cs, time.Minute)
	mustNoError(t, err, "ExtendMany")
	mustEqual(t, []error{nil, nil}, errs, "ExtendMany's errors")
	next := e.claimNext(cs[:1], fmt.Sprintf("%s/4@1", a))
	mustEqual(t, payload("a4"), next[0].Payload, "a/4's payload")
	results, errs, err := e.b.RetryMany(e.ctx, []worklease.Failure{{Claim: cs[1], Cause: errors.New("later"), Delay: time.Second}})
	mustNoError(t, err, "RetryMany")
	mustEqual(t, []error{nil}, errs, "RetryMany's errors")
	mustEqual(t, []worklease.RetryResult{{RetryCount: 1}}, results, "RetryMany")
	errs, err = e.b.SucceedMany(e.ctx, next)
	mustNoError(t, err, "SucceedMany")
	mustEqual(t, []error{nil}, errs, "SucceedMany's errors")
	e.clk.Advance(time.Second)
	w, err := e.b.WaitClaim(e.ctx, 1, time.Hour)
	mustNoError(t, err, "WaitClaim")
	mustTrue(t, len(w) == 1 && w[0].Domain == c && w[0].Offset == 2 && w[0].Attempt == 2, "WaitClaim claimed %v", len(w))
	mustEqual(t, worklease.RetryResult{DeadLettered: true, RetryCount: 2}, e.retry(c, w[0].Token, errors.New("no"), 0), "Retry")

	// The looks: b comes back, leased.
	tok = e.acquire(b, 1, worklease.Acquired).Token
	mustEqual(t, []string{a, b, c}, e.domains())
	// The listings' order is the backend's own.
	ds := e.listDomains(worklease.DomainQuery{Prefix: a[:longShared], Limit: 1})
	mustEqual(t, []string{a, b, c}, sortedNames(ds), "ListDomains, a page each")
	for _, d := range ds {
		mustEqual(t, d.Domain == b, d.Leased && d.Lease.Token == tok, "ListDomains: the lease of %s", errorName(d.Domain))
	}
	dead := namesOf(e.listDomains(worklease.DomainQuery{State: worklease.DomainDeadLettered, Limit: 1}))
	mustEqual(t, []string{a, c}, sortedNames(e.listDomains(worklease.DomainQuery{State: worklease.DomainDeadLettered})),
		"ListDomains of the dead-lettered, a page each")
	ls := e.listLeases(1)
	mustTrue(t, len(ls) == 1 && ls[0].Domain == b && ls[0].Token == tok, "ListLeases: %d leases", len(ls))
	mustEqual(t, ls, e.leases(), "Leases")
	mustEqual(t, []int64{2, 2}, offsetsOf(e.deadLetters("")), "DeadLetters")
	for _, o := range []worklease.DeadLetterOrder{worklease.DeadLettersByDomain, worklease.DeadLettersNewestFirst} {
		dls := e.listDeadLetters(worklease.DeadLetterQuery{Order: o, Limit: 1, Payloads: true})
		want := dead // domain by domain, in the order of ListDomains
		if o == worklease.DeadLettersNewestFirst {
			want = []string{c, a}
		}
		mustEqual(t, 2, len(dls), "ListDeadLetters %v", o)
		mustTrue(t, dls[0].Domain == want[0] && dls[1].Domain == want[1], "ListDeadLetters %v: in order", o)
	}
	dls := e.listDeadLetters(worklease.DeadLetterQuery{Domain: c, Payloads: true})
	mustTrue(t, len(dls) == 1 && dls[0].Domain == c && dls[0].Offset == 2, "ListDeadLetters of c: %d", len(dls))
	mustEqual(t, payload("c2"), dls[0].Payload, "c/2's dead letter's payload")
	dl, err := e.b.InspectDeadLetter(e.ctx, c, 2)
	mustNoError(t, err, "InspectDeadLetter")
	mustEqual(t, dls[0], dl, "InspectDeadLetter")
	totals, err := e.b.Totals(e.ctx)
	mustNoError(t, err, "Totals")
	mustEqual(t, worklease.Totals{Domains: 3, Leased: 1, DeadLetters: 2}, totals, "Totals")
	stats, err := e.b.Stats(e.ctx)
	mustNoError(t, err, "Stats")
	mustTrue(t, stats.Forgotten == 1 && stats.Expired == 1 && stats.Killed == 1 && stats.DeadLettered == 3, "Stats: %+v", stats)
}

// namesOf returns the domains of ds, in order.
func namesOf(ds []worklease.DomainSummary) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Domain)
	}
	return out
}
