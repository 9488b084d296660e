package pg_test

import (
	"context"
	"sync"
	"testing"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/leasetest"
	"github.com/worklease/worklease/pg"
)

// The PostgreSQL Manager keeps the lease contract: the conformance suite,
// each backend on a schema of its own, which a restart reopens.
func TestConformance(t *testing.T) {
	pool := testPool(t)
	schemaPool := newSchemaPool(t, pool)
	var mu sync.Mutex // guards schemas: the suite's cases run in parallel
	schemas := make(map[worklease.Backend]string)
	open := func(t *testing.T, schema string, opts ...worklease.Option) worklease.Backend {
		m, err := pg.OpenSchema(context.Background(), pool, schema, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		mu.Lock()
		schemas[m] = schema
		mu.Unlock()
		return m
	}
	leasetest.Run(t, leasetest.Suite{
		New: func(t *testing.T, opts ...worklease.Option) worklease.Backend {
			return open(t, schemaPool.get(t), opts...)
		},
		Reopen: func(t *testing.T, b worklease.Backend, opts ...worklease.Option) worklease.Backend {
			_ = b.Close()
			mu.Lock()
			schema := schemas[b]
			mu.Unlock()
			return open(t, schema, opts...)
		},
		Events: true,
	})
}
