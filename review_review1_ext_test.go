package worklease_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/internal/memjournal"
)

func rv1Open(t *testing.T, j *memjournal.Journal, clk *clock.Fake, opts ...worklease.Option) *worklease.Manager {
	t.Helper()
	m, err := worklease.New(append([]worklease.Option{worklease.WithJournal(j), worklease.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rv1Check(t *testing.T, m *worklease.Manager) {
	t.Helper()
	if err := worklease.CheckInvariants(m); err != nil {
		t.Fatal(err)
	}
}

func TestReview1RestoredTokens(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	j := &memjournal.Journal{}
	m1 := rv1Open(t, j, clk, worklease.WithMaxRetries(1))
	a, _ := m1.TryAcquire("d", 0)
	m1.TryAcquire("d", 1)
	b, _ := m1.TryAcquire("e", 0)
	m1.Close()

	m2 := rv1Open(t, j.Reopen(), clk, worklease.WithMaxRetries(1))
	rv1Check(t, m2)
	if r, _ := m2.TryAcquire("d", 0); r.Status != worklease.AlreadyAcquired || r.Token != a.Token {
		t.Fatalf("restored %+v want token %v", r, a.Token)
	}
	// snapshot with the restored lease, and restart again
	if err := m2.Snapshot(); err != nil {
		t.Fatal(err)
	}
	m2.ForceRelease("e")
	e2, _ := m2.TryAcquire("e", 0)
	if e2.Token == b.Token || e2.Token.Fence() <= b.Token.Fence() {
		t.Fatalf("regrant %v after %v", e2.Token, b.Token)
	}
	if _, err := m2.Succeed("e", b.Token); !errors.Is(err, worklease.ErrLeaseRevoked) {
		t.Fatalf("old e token: %v", err)
	}
	m2.Close()

	m3 := rv1Open(t, j.Reopen(), clk, worklease.WithMaxRetries(1))
	rv1Check(t, m3)
	sr, err := m3.SucceedNext("d", a.Token)
	if err != nil || sr.Status != worklease.NextAcquired || sr.Lease.Offset != 1 {
		t.Fatalf("%+v %v", sr, err)
	}
	if sr.Lease.Token.Fence() != a.Token.Fence()+1 {
		t.Fatalf("fence %d after %d", sr.Lease.Token.Fence(), a.Token.Fence())
	}
	if _, err := m3.Succeed("e", b.Token); !errors.Is(err, worklease.ErrLeaseRevoked) {
		t.Fatalf("old e token after restart: %v", err)
	}
	if _, err := m3.Succeed("e", e2.Token); err != nil {
		t.Fatalf("e2 after restart: %v", err)
	}
	rv1Check(t, m3)
	m3.Close()
}

// WithObserver promises events "in the order they happened for each
// domain". A domain forgotten while another goroutine is still delivering
// its earlier events, then created again, has the new incarnation's events
// delivered before the old one's Forgotten.
func TestReview1ObserverOrderAcrossForget(t *testing.T) {
	blocked, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var seen []worklease.EventKind
	obs := worklease.ObserverFunc(func(e worklease.Event) {
		mu.Lock()
		seen = append(seen, e.Kind)
		mu.Unlock()
		if e.Kind == worklease.EventProcessed {
			close(blocked)
			<-release
		}
	})
	m, err := worklease.New(worklease.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.TryAcquire("d", 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Succeed("d", a.Token) // its goroutine delivers Processed, and blocks there
	}()
	<-blocked
	if err := m.Forget("d"); err != nil { // Forgotten is left to the goroutine delivering
		t.Fatal(err)
	}
	if r, err := m.TryAcquire("d", 0); err != nil || r.Status != worklease.Acquired {
		t.Fatal(r, err)
	}
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	want := []worklease.EventKind{worklease.EventAcquired, worklease.EventProcessed, worklease.EventForgotten, worklease.EventAcquired}
	if !slices.Equal(seen, want) {
		t.Fatalf("observer saw %v, want %v", seen, want)
	}
}
