package leasetest_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// A backend other than the Manager makes its tokens and results with the
// exported API alone; these tests do the same.

func TestTokensFromParts(t *testing.T) {
	t.Parallel()
	for _, parts := range [][3]uint64{{1, 1, 1}, {7, 0x2a, 0xdeadbeef}, {math.MaxUint64, math.MaxUint64, math.MaxUint64}} {
		tok, err := worklease.NewToken(parts[0], parts[1], parts[2])
		if err != nil {
			t.Fatalf("NewToken%v: %v", parts, err)
		}
		if got := [3]uint64{tok.Fence(), tok.Serial(), tok.Instance()}; got != parts {
			t.Fatalf("NewToken%v has parts %v", parts, got)
		}
		if tok.IsZero() {
			t.Fatalf("NewToken%v is zero", parts)
		}
		parsed, err := worklease.ParseToken(tok.String())
		if err != nil || parsed != tok {
			t.Fatalf("ParseToken(%q) = %v, %v; want %v", tok.String(), parsed, err, tok)
		}
		again, err := worklease.NewToken(tok.Fence(), tok.Serial(), tok.Instance())
		if err != nil || again != tok {
			t.Fatalf("a token made of the parts of %v is %v, %v", tok, again, err)
		}
	}
	for _, parts := range [][3]uint64{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}} {
		if _, err := worklease.NewToken(parts[0], parts[1], parts[2]); !errors.Is(err, worklease.ErrInvalidToken) {
			t.Fatalf("NewToken%v: error %v, want ErrInvalidToken", parts, err)
		}
	}
	a, _ := worklease.NewToken(2, 1, 9)
	b, _ := worklease.NewToken(3, 1, 9)
	if a == b || a.Fence() >= b.Fence() {
		t.Fatalf("tokens %v and %v", a, b)
	}
	if !(worklease.Token{}).IsZero() {
		t.Fatal("the zero Token is not zero")
	}
	if _, err := worklease.ParseToken(worklease.Token{}.String()); !errors.Is(err, worklease.ErrInvalidToken) {
		t.Fatalf("ParseToken of the zero Token's text: %v", err)
	}
}

func TestResultsFromFields(t *testing.T) {
	t.Parallel()
	tok, err := worklease.NewToken(3, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lease := worklease.LeaseInfo{Domain: "d", Offset: 4, Token: tok, AcquiredAt: at, ExpiresAt: at.Add(time.Minute), RetryCount: 1}
	acq := worklease.AcquireResult{Status: worklease.Acquired, Token: tok, AcquiredAt: at, ExpiresAt: at.Add(time.Minute), RetryCount: 1}
	succ := worklease.SucceedResult{Status: worklease.NextAcquired, Lease: lease}
	hint := worklease.SucceedResult{Status: worklease.NextHint, Next: 5}
	fail := worklease.FailResult{Status: worklease.GiveUpNextAcquired, RetryCount: 3, Lease: lease}
	head := worklease.Head{Next: 5, HasNext: true}
	exp := worklease.Expiry{Domain: "d", Offset: 4, Token: tok, Attempts: 2, DeadLettered: false, Head: head}
	dl := worklease.DeadLetter{Domain: "d", Offset: 4, Cause: worklease.ErrLeaseExpired, Attempts: 2, At: at}
	info := worklease.DomainInfo{Leased: true, Lease: lease, Paused: true, Backlog: []int64{5, 6}, Processed: 3, Failed: 1}
	ev := worklease.Event{Kind: worklease.EventAcquired, Domain: "d", Offset: 4, Attempt: 2, Token: tok, Cause: nil, At: at}
	boe := &worklease.BacklogOrderError{Domain: "d", Expected: 5, Got: 7}

	if acq.Token != lease.Token || succ.Lease != lease || fail.Lease.Offset != 4 || hint.Next != 5 {
		t.Fatal("results do not hold what they were made with")
	}
	if exp.Next != 5 || !exp.HasNext {
		t.Fatalf("Expiry's Head: %+v", exp)
	}
	if !errors.Is(dl.Cause, worklease.ErrLeaseExpired) || info.Backlog[0] != 5 || ev.Kind.String() != "Acquired" {
		t.Fatal("results do not hold what they were made with")
	}
	if !errors.Is(boe, worklease.ErrBacklogOrder) {
		t.Fatal("a BacklogOrderError made by hand does not match ErrBacklogOrder")
	}
	for _, s := range []interface{ String() string }{
		worklease.Acquired, worklease.AlreadyAcquired, worklease.Enqueued, worklease.AlreadyProcessed, worklease.AlreadyFailed,
		worklease.NoBacklog, worklease.NextHint, worklease.NextAcquired,
		worklease.RetryScheduled, worklease.GiveUpNoBacklog, worklease.GiveUpNextHint, worklease.GiveUpParked, worklease.GiveUpNextAcquired,
	} {
		if s.String() == "" {
			t.Fatalf("%#v has no name", s)
		}
	}
}
