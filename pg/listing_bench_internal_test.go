package pg

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
)

// listingBench opens a Manager on a new schema holding 1,000,000 domains,
// filled by SQL: one in a hundred has a dead letter (10,000), and one in
// ten of those has ten more (100,000 dead letters in all, 1,000 domains
// with eleven), one in a hundred is paused. It skips b without a server.
func listingBench(b *testing.B) (context.Context, *Manager) {
	b.Helper()
	url := os.Getenv("WORKLEASE_PG_URL")
	if url == "" {
		b.Skip("no PostgreSQL server: WORKLEASE_PG_URL is not set")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	name := fmt.Sprintf("listbench_%x", newInstance())
	b.Cleanup(func() { _, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE") })
	m, err := OpenSchema(ctx, pool, name)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	s := m.schema
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %[1]s.domains (domain, key, serial, fence, failed, paused)
			SELECT d, %[1]s._key(d), i, 1,
				CASE WHEN i %% 100 = 0 THEN CASE WHEN i %% 1000 = 0 THEN 91 ELSE 1 END ELSE 0 END, i %% 100 = 50
			FROM generate_series(1, 1000000) i, convert_to('tenant-' || lpad(i::text, 7, '0'), 'UTF8') d`, s),
		fmt.Sprintf(`INSERT INTO %[1]s.dead_letters (domain, off, why, cause, attempts, at)
			SELECT domain, o, 2, 'boom', 3, now() - (serial + o) * interval '1 ms'
			FROM %[1]s.domains, generate_series(1, 100) o WHERE failed > 0 AND o <= failed`, s),
		fmt.Sprintf("SELECT setval('%s.domain_serial', 1000000)", s),
		"VACUUM ANALYZE " + s + ".domains",
		"VACUUM ANALYZE " + s + ".dead_letters",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	return ctx, m
}

// BenchmarkPostgresListing lists a page of 100 among 1,000,000
// domains from a cursor half way: every domain, those with a prefix,
// those with dead letters and the paused ones; and the first page of
// 100,000 dead letters, by domain and newest first.
func BenchmarkPostgresListing(b *testing.B) {
	ctx, m := listingBench(b)
	half, err := m.ListDomains(ctx, worklease.DomainQuery{Prefix: "tenant-04999", Limit: 1})
	if err != nil || half.Next == "" {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		list func() (int, error)
	}{
		{"domains", func() (int, error) {
			p, err := m.ListDomains(ctx, worklease.DomainQuery{After: half.Next, Limit: 100})
			return len(p.Domains), err
		}},
		{"domains-prefix", func() (int, error) {
			p, err := m.ListDomains(ctx, worklease.DomainQuery{Prefix: "tenant-07", Limit: 100})
			return len(p.Domains), err
		}},
		{"domains-dead-lettered", func() (int, error) {
			p, err := m.ListDomains(ctx, worklease.DomainQuery{State: worklease.DomainDeadLettered, After: half.Next, Limit: 100})
			return len(p.Domains), err
		}},
		{"domains-paused", func() (int, error) {
			p, err := m.ListDomains(ctx, worklease.DomainQuery{State: worklease.DomainPaused, After: half.Next, Limit: 100})
			return len(p.Domains), err
		}},
		{"dead-letters-by-domain", func() (int, error) {
			p, err := m.ListDeadLetters(ctx, worklease.DeadLetterQuery{Limit: 100, Payloads: true})
			return len(p.DeadLetters), err
		}},
		{"dead-letters-newest-first", func() (int, error) {
			p, err := m.ListDeadLetters(ctx, worklease.DeadLetterQuery{Order: worklease.DeadLettersNewestFirst, Limit: 100, Payloads: true})
			return len(p.DeadLetters), err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				n, err := c.list()
				if err != nil || n != 100 {
					b.Fatal(n, err)
				}
			}
		})
	}
}
