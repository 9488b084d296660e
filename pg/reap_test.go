package pg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/leasetest"
)

// Reap expires every lease due, however many, in transactions of a
// hundred: each due domain once, its offset back at the front, and the
// leases not due left alone.
func TestReapInBatches(t *testing.T) {
	const due, notDue = 250, 5
	pool := testPool(t)
	ctx := context.Background()
	clock := leasetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m, _ := newManager(t, pool, worklease.WithLeaseTTL(time.Minute), worklease.WithClock(clock))
	for i := range due {
		if res, err := m.TryAcquire(ctx, fmt.Sprintf("due-%03d", i), 7); err != nil || res.Status != worklease.Acquired {
			t.Fatalf("TryAcquire: %v, %v", res.Status, err)
		}
	}
	clock.Advance(30 * time.Second)
	for i := range notDue {
		if res, err := m.TryAcquire(ctx, fmt.Sprintf("later-%d", i), 7); err != nil || res.Status != worklease.Acquired {
			t.Fatalf("TryAcquire: %v, %v", res.Status, err)
		}
	}
	clock.Advance(31 * time.Second)

	expired, err := m.Reap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != due {
		t.Fatalf("Reap expired %d leases; want %d", len(expired), due)
	}
	seen := make(map[string]bool)
	for _, e := range expired {
		if seen[e.Domain] || e.Offset != 7 || e.DeadLettered || !e.HasNext || e.Next != 7 {
			t.Fatalf("expiry %+v (seen before: %v); want each due domain once, offset 7 back at its front", e, seen[e.Domain])
		}
		seen[e.Domain] = true
	}
	leases, err := m.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != notDue {
		t.Fatalf("%d leases left; want the %d not due", len(leases), notDue)
	}
	if again, err := m.Reap(ctx); err != nil || len(again) != 0 {
		t.Fatalf("a second Reap: %d expiries, %v; want none", len(again), err)
	}
}
