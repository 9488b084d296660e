package pg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/memjournal"
	"github.com/worklease/worklease/pg"
)

// Processes that start together on a new schema all open it: one installs
// it, the others find it installed, and they share its domains and tokens.
func TestOpenConcurrently(t *testing.T) {
	pool := testPool(t)
	schema := newSchemaName()
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	ctx := context.Background()

	const n = 6
	managers := make([]*pg.Manager, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { managers[i], errs[i] = pg.OpenSchema(ctx, pool, schema) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
	}
	res, err := managers[0].TryAcquire(ctx, "d", 1)
	if err != nil || res.Status != worklease.Acquired {
		t.Fatalf("TryAcquire: %v, %v", res, err)
	}
	// Another Manager sees the lease, and its holder's token is good there.
	again, err := managers[n-1].TryAcquire(ctx, "d", 1)
	if err != nil || again.Status != worklease.AlreadyAcquired || again.Token != res.Token {
		t.Fatalf("TryAcquire on another Manager: %v, %v; want AlreadyAcquired under %v", again, err, res.Token)
	}
	if _, err := managers[n-1].Succeed(ctx, "d", res.Token); err != nil {
		t.Fatalf("Succeed on another Manager: %v", err)
	}
}

// Open refuses what it cannot honour, and a schema a newer version
// installed.
func TestOpenRefuses(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	schema := newSchemaName()
	t.Cleanup(func() { dropSchema(t, pool, schema) })

	if _, err := pg.OpenSchema(ctx, pool, schema, worklease.WithMaxRetries(-1)); !errors.Is(err, worklease.ErrInvalidConfig) {
		t.Errorf("WithMaxRetries(-1): %v, want ErrInvalidConfig", err)
	}
	if _, err := pg.OpenSchema(ctx, pool, schema, worklease.WithJournal(new(memjournal.Journal))); !errors.Is(err, worklease.ErrInvalidConfig) {
		t.Errorf("WithJournal: %v, want ErrInvalidConfig", err)
	}
	for _, bad := range []string{"", "it's", "a$$b", "Upper", "9lives", "x'||(SELECT 1)::text||'", strings.Repeat("a", 64)} {
		if _, err := pg.OpenSchema(ctx, pool, bad); !errors.Is(err, worklease.ErrInvalidConfig) {
			t.Errorf("schema %q: %v, want ErrInvalidConfig", bad, err)
		}
	}

	m, err := pg.OpenSchema(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	// A version from the future.
	if _, err := pool.Exec(ctx, "INSERT INTO "+schema+".migrations (version) VALUES (1000)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.OpenSchema(ctx, pool, schema); !errors.Is(err, pg.ErrSchemaTooNew) {
		t.Errorf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
}
