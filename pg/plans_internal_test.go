package pg

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// planEnv is a schema with many domains, filled by SQL: the first leased
// domains hold a lease (fence 1, serial = their number) with one offset
// queued behind it, and the rest are idle with nothing queued. No domain
// is ready.
type planEnv struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	schema string // quoted
	pull   pullStatements
	n      int // statements explained
}

func newPlanEnv(t *testing.T, domains, leased int) *planEnv {
	t.Helper()
	ctx, pool, name := scratchSchema(t, "plans")
	m, err := OpenSchema(ctx, pool, name)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	s := pgx.Identifier{name}.Sanitize()
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %[1]s.domains (domain, key, serial, fence, lease_off, lease_attempts, lease_acquired_at, queued, back_pos)
			SELECT d, %[1]s._key(d), i, 1,
				CASE WHEN i <= %[2]d THEN 0 END, CASE WHEN i <= %[2]d THEN 1 ELSE 0 END, CASE WHEN i <= %[2]d THEN now() END,
				CASE WHEN i <= %[2]d THEN 1 ELSE 0 END, CASE WHEN i <= %[2]d THEN 2 ELSE 0 END
			FROM generate_series(1, %[3]d) i, convert_to('d' || lpad(i::text, 7, '0'), 'UTF8') d`, s, leased, domains),
		fmt.Sprintf(`INSERT INTO %[1]s.backlog (domain, off, pos) SELECT domain, 1, 1 FROM %[1]s.domains WHERE lease_off IS NOT NULL`, s),
		fmt.Sprintf(`SELECT setval('%[1]s.domain_serial', %[2]d)`, s, domains),
		"ANALYZE " + s + ".domains",
		"ANALYZE " + s + ".backlog",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return &planEnv{ctx: ctx, pool: pool, schema: s, pull: newPullStatements(s)}
}

// explain runs statement with args under EXPLAIN ANALYZE, with the
// generic plan that a prepared statement runs from its sixth run on, in a
// transaction it rolls back, and returns the plan's nodes.
func (e *planEnv) explain(t *testing.T, statement string, args ...any) []map[string]any {
	t.Helper()
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(e.ctx) }()
	if _, err := tx.Exec(e.ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	e.n++
	name := fmt.Sprintf("explained_%d", e.n) // prepared statements outlive transactions
	if _, err := tx.Exec(e.ctx, "PREPARE "+name+" AS "+statement); err != nil {
		t.Fatal(err)
	}
	// EXECUTE takes its arguments as literals.
	params := ""
	for i, a := range args {
		if i > 0 {
			params += ", "
		}
		params += literal(a)
	}
	var out []byte
	if err := tx.QueryRow(e.ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE "+name+"("+params+")").Scan(&out); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(e.ctx, "DEALLOCATE "+name); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan map[string]any }
	if err := json.Unmarshal(out, &plans); err != nil {
		t.Fatal(err)
	}
	var nodes []map[string]any
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		nodes = append(nodes, n)
		if sub, ok := n["Plans"].([]any); ok {
			for _, s := range sub {
				walk(s.(map[string]any))
			}
		}
	}
	walk(plans[0].Plan)
	return nodes
}

// literal returns a as an SQL literal.
func literal(a any) string {
	switch v := a.(type) {
	case nil:
		return "NULL"
	case bool:
		return fmt.Sprint(v)
	case int64:
		return fmt.Sprint(v)
	case time.Time:
		return fmt.Sprintf("'%s'::timestamptz", v.Format(time.RFC3339Nano))
	case []byte:
		return fmt.Sprintf(`'\x%x'::bytea`, v)
	case [][]byte:
		s := "ARRAY["
		for i, b := range v {
			if i > 0 {
				s += ","
			}
			s += literal(b)
		}
		return s + "]::bytea[]"
	case []int64:
		s := "'{"
		for i, n := range v {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprint(n)
		}
		return s + "}'::bigint[]"
	}
	panic(fmt.Sprintf("no literal for %T", a))
}

// tokens returns the first n leased domains and their tokens' fences and
// serials.
func tokens(n int) (domains [][]byte, fences, serials []int64) {
	for i := 1; i <= n; i++ {
		domains = append(domains, fmt.Appendf(nil, "d%07d", i))
		fences, serials = append(fences, 1), append(serials, int64(i))
	}
	return domains, fences, serials
}

// keysOf returns the keys of domains, as the batches take them.
func keysOf(domains [][]byte) [][]byte {
	keys := make([][]byte, len(domains))
	for i, d := range domains {
		keys[i] = key(d)
	}
	return keys
}

// The batches' statements join their tokens to the domains' rows in linear
// time: a batch of 2,000 (MaxClaim is 10,000) compares each token with the
// rows of its own domain, not with every row of the batch.
func TestPlanBatchJoinsAreLinear(t *testing.T) {
	const batch = 2000
	e := newPlanEnv(t, 20_000, batch)
	domains, fences, serials := tokens(batch)
	for _, c := range []planCase{
		{"SucceedMany", e.pull.succeedMany, []any{domains, fences, serials, true, nil, false, keysOf(domains)}},
		{"ClaimNext", e.pull.claimNext, []any{domains, fences, serials, true, nil, false, int64(0), keysOf(domains)}},
	} {
		var removed, ended float64
		for _, n := range e.explain(t, c.statement, c.args...) {
			r, _ := n["Rows Removed by Join Filter"].(float64)
			removed += r
			if n["Node Type"] == "ModifyTable" && n["Relation Name"] == "domains" {
				ended, _ = n["Actual Rows"].(float64)
			}
		}
		if ended != batch {
			t.Errorf("%s of %d leases ended %v", c.name, batch, ended)
		}
		if removed > 10*batch {
			t.Errorf("%s of %d leases: its joins compared and dropped %.0f rows; want at most a few per lease", c.name, batch, removed)
		}
	}
}

// A planCase is a statement to explain, named after its call, with its
// arguments.
type planCase struct {
	name, statement string
	args            []any
}

// readyChecks returns a completion of each kind that leaves its domain
// ready, and so asks whether another is, ending the leases of e's first
// ten leased domains.
func readyChecks(t *testing.T, e *planEnv) []planCase {
	t.Helper()
	ds, fs, ss := tokens(10)
	// ClaimNext's domains have had their streak: they become ready.
	if _, err := e.pool.Exec(e.ctx, fmt.Sprintf("UPDATE %s.domains SET streak = %d, streak_fence = fence WHERE serial > 5 AND serial <= 10", e.schema, MaxStreak)); err != nil {
		t.Fatal(err)
	}
	return []planCase{
		{"SucceedMany (one domain)", e.pull.succeedOne, []any{ds[0], fs[0], ss[0], true, nil, false}},
		{"SucceedMany", e.pull.succeedMany, []any{ds[1:5], fs[1:5], ss[1:5], true, nil, false, keysOf(ds[1:5])}},
		{"ClaimNext", e.pull.claimNext, []any{ds[5:], fs[5:], ss[5:], true, nil, false, int64(0), keysOf(ds[5:])}},
	}
}

// A completion that makes its domain ready asks whether another domain is
// ready (to notify waiting claims only if none is) through the ready index,
// not by reading every domain: here no other of 20,000 domains is ready.
func TestPlanReadyCheckReadsNoWholeTable(t *testing.T) {
	const domains = 20_000
	e := newPlanEnv(t, domains, 10)
	for _, c := range readyChecks(t, e) {
		var read float64
		for _, n := range e.explain(t, c.statement, c.args...) {
			if n["Relation Name"] == "domains" && n["Node Type"] == "Seq Scan" {
				r, _ := n["Rows Removed by Filter"].(float64)
				a, _ := n["Actual Rows"].(float64)
				read += r + a
			}
		}
		if read >= domains/2 {
			t.Errorf("%s read %.0f of the %d domains' rows one by one", c.name, read, domains)
		}
	}
}

// The same check, and the one of whether a claim left domains ready,
// read the ready index from its oldest end: domains waiting out a retry
// delay, whose entries lie at the newest end, are not read past. Here
// 10,000 domains wait, and 100 are ready.
func TestPlanReadyCheckSkipsDelayedDomains(t *testing.T) {
	const domains, delayed, ready = 20_000, 10_000, 100
	e := newPlanEnv(t, domains, 10)
	for _, q := range []string{
		fmt.Sprintf("UPDATE %s.domains SET ready_at = now() + (serial - 10) * interval '1 ms' WHERE serial > 10 AND serial <= %d",
			e.schema, 10+delayed),
		fmt.Sprintf("UPDATE %s.domains SET ready_at = now() - interval '1 s' WHERE serial > %d AND serial <= %d",
			e.schema, 10+delayed, 10+delayed+ready),
		"VACUUM ANALYZE " + e.schema + ".domains",
	} {
		if _, err := e.pool.Exec(e.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// A claim for one domain that says whether more are ready, as
	// WaitClaim's do.
	claim := planCase{"Claim", e.pull.claim, []any{int64(1), nil, int64(0), true}}
	for _, c := range append(readyChecks(t, e), claim) {
		var pages float64
		for _, n := range e.explain(t, c.statement, c.args...) {
			if n["Index Name"] == "domains_ready" {
				h, _ := n["Shared Hit Blocks"].(float64)
				r, _ := n["Shared Read Blocks"].(float64)
				pages += h + r
			}
		}
		if pages == 0 || pages > 20 {
			t.Errorf("%s read %.0f pages through the ready index; want a few", c.name, pages)
		}
	}
}
