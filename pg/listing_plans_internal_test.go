package pg

import (
	"fmt"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// Each page of a listing is one query that reads an index from its cursor
// on: among 100,000 domains, no page reads a table whole, and none reads
// more than the rows it may read: a page of 100, or for a filter no index
// serves, listBudget rows, each on a page of its own at worst. Of the
// domains, the first 1,000 are leased with an expiry, one in a hundred has
// a dead letter, one in a hundred is paused, and one in a thousand has 200
// offsets queued.
func TestPlanListingsReadIndexes(t *testing.T) {
	const domains = 100_000
	e := newPlanEnv(t, domains, 0)
	for _, q := range []string{
		fmt.Sprintf(`UPDATE %[1]s.domains SET lease_off = 0, lease_attempts = 1, lease_acquired_at = now(),
			lease_expires_at = now() + serial * interval '1 ms' WHERE serial <= 1000`, e.schema),
		fmt.Sprintf("UPDATE %s.domains SET failed = 1 WHERE serial %% 100 = 7", e.schema),
		fmt.Sprintf("INSERT INTO %[1]s.dead_letters (domain, off, why, cause, attempts, at) SELECT domain, 3, 2, 'boom', 1, now() - serial * interval '1 s' FROM %[1]s.domains WHERE failed > 0", e.schema),
		fmt.Sprintf("UPDATE %s.domains SET paused = true WHERE serial %% 100 = 9", e.schema),
		fmt.Sprintf("UPDATE %s.domains SET queued = 200, back_pos = 200 WHERE serial %% 1000 = 11", e.schema),
		fmt.Sprintf("INSERT INTO %[1]s.backlog (domain, off, pos) SELECT domain, i, i FROM %[1]s.domains, generate_series(0, 199) i WHERE queued > 0", e.schema),
		"VACUUM ANALYZE " + e.schema + ".domains",
		"VACUUM ANALYZE " + e.schema + ".dead_letters",
		"VACUUM ANALYZE " + e.schema + ".backlog",
	} {
		if _, err := e.pool.Exec(e.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	m := &Manager{schema: e.schema}
	mid := []byte("d0050000")
	var cases []planCase
	for _, state := range append(worklease.DomainStates(), 0, worklease.DomainLeased|worklease.DomainDeadLettered) {
		for _, after := range [][]byte{nil, mid} {
			for _, prefix := range []string{"", "d004"} {
				q := worklease.DomainQuery{State: state, Prefix: prefix}
				statement, args, _ := m.domainsQuery(q, after, 100)
				cases = append(cases, planCase{fmt.Sprintf("ListDomains %v after %q prefix %q", state, after, prefix), statement, args})
			}
		}
	}
	statement, args := m.expiringQuery(time.Time{}, nil, 100)
	cases = append(cases, planCase{"ListLeases", statement, args})
	statement, args = m.expiringQuery(time.Now().Add(500*time.Millisecond), []byte("d0000500"), 100)
	cases = append(cases, planCase{"ListLeases after", statement, args})
	for _, q := range []worklease.DeadLetterQuery{
		{Payloads: true},
		{Order: worklease.DeadLettersNewestFirst, Payloads: true},
		{Domain: "d0000007"},
	} {
		statement, args, _, err := m.deadLettersQuery(q, 100)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, planCase{fmt.Sprintf("ListDeadLetters %+v", q), statement, args})
	}
	for _, c := range cases {
		var pages float64
		for _, n := range e.explain(t, c.statement, c.args...) {
			if n["Node Type"] == "Seq Scan" {
				t.Errorf("%s: reads %v whole", c.name, n["Relation Name"])
			}
			if n["Parent Relationship"] == nil { // the top node counts its children's
				h, _ := n["Shared Hit Blocks"].(float64)
				r, _ := n["Shared Read Blocks"].(float64)
				pages += h + r
			}
		}
		t.Logf("%s: %.0f pages", c.name, pages)
		if pages > listBudget+500 {
			t.Errorf("%s: read %.0f pages; want at most about one for each row it may read", c.name, pages)
		}
	}
}
