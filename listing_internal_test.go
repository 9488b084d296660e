package worklease

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestTableAscendModel checks domainTable.ascend against a sorted list:
// from any cursor, it yields exactly the records after it, in order of
// (hash, key). As in TestDomainMapModel, hashes come from a handful of
// values, so keys tie and runs wrap round the table's end.
func TestTableAscendModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var d domainMap
		model := map[string]uint64{}
		hashes := []uint64{0, 1, 2, 1 << 62, 1<<62 + 5, 3 << 62, ^uint64(0), ^uint64(0) - 1}
		name := rapid.StringMatching(`[a-f]{1,3}`)
		for range rapid.IntRange(1, 150).Draw(t, "steps") {
			n := name.Draw(t, "name")
			if h, ok := model[n]; ok {
				d.remove(h, d.get(h, n))
				delete(model, n)
				continue
			}
			h := rapid.SampledFrom(hashes).Draw(t, "hash")
			d.put(h, &domainRecord{domain: n})
			model[n] = h
		}
		type key struct {
			h uint64
			d string
		}
		var want []key
		for n, h := range model {
			want = append(want, key{h, n})
		}
		order := func(a, b key) int { return cmp.Or(cmp.Compare(a.h, b.h), strings.Compare(a.d, b.d)) }
		slices.SortFunc(want, order)
		var from key
		if len(want) > 0 && rapid.Bool().Draw(t, "from a record") {
			from = want[rapid.IntRange(0, len(want)-1).Draw(t, "cursor")]
		} else {
			from = key{rapid.SampledFrom(hashes).Draw(t, "cursor hash"), rapid.SampledFrom([]string{"", "b", "ccc"}).Draw(t, "cursor key")}
		}
		var after []key
		for _, k := range want {
			if order(k, from) > 0 {
				after = append(after, k)
			}
		}
		var got []key
		if tab := d.table.Load(); tab != nil {
			tab.ascend(from.h, from.d, func(h uint64, r *domainRecord) bool {
				got = append(got, key{h, r.domain})
				return true
			})
		}
		if !slices.Equal(after, got) {
			t.Fatalf("from %v: got %v, want %v", from, got, after)
		}
	})
}

// TestListDomainsPagesOneShard lists many domains of one shard, whose
// table has long runs, by pages of every size, and finds each once.
func TestListDomainsPagesOneShard(t *testing.T) {
	m, err := New(WithShards(2))
	require.NoError(t, err)
	defer m.Close()
	const n = 3000
	for i := range n {
		require.NoError(t, m.Pause(fmt.Sprintf("d%05d", i)))
	}
	for _, limit := range []int{1, 7, 100, MaxPageLimit} {
		seen := map[string]bool{}
		q := DomainQuery{Limit: limit}
		var prev domainPos
		for {
			p, err := m.ListDomains(q)
			require.NoError(t, err)
			for _, d := range p.Domains {
				require.False(t, seen[d.Domain], "%s listed twice", d.Domain)
				seen[d.Domain] = true
				h := m.hash(d.Domain)
				cur := domainPos{int(h & m.shardMask), h, d.Domain}
				require.Positive(t, cmp.Or(cmp.Compare(cur.shard, prev.shard), cmp.Compare(cur.hash, prev.hash), strings.Compare(cur.domain, prev.domain)),
					"%s out of order", d.Domain)
				prev = cur
			}
			if p.Next == "" {
				break
			}
			q.After = p.Next
		}
		require.Len(t, seen, n, "pages of %d", limit)
	}
}

// TestListDomainsWhileTheMapChanges pages through the domains while other
// goroutines add and forget domains, which fills and empties slots and
// rebuilds the shards' tables under the pages: every domain there all
// along is listed exactly once, and none twice.
func TestListDomainsWhileTheMapChanges(t *testing.T) {
	m, err := New(WithShards(2))
	require.NoError(t, err)
	defer m.Close()
	const stable = 2000
	for i := range stable {
		require.NoError(t, m.Pause(fmt.Sprintf("stable-%d", i)))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := fmt.Sprintf("churn-%d-%d", g, i%500)
				if _, err := m.TryAcquire(d, 0); err != nil {
					panic(err)
				}
				if i%3 == 0 {
					if _, err := m.Succeed(d, mustToken(m, d)); err != nil {
						panic(err)
					}
					if err := m.Forget(d); err != nil {
						panic(err)
					}
				}
			}
		}()
	}
	for range 5 {
		seen := map[string]int{}
		q := DomainQuery{Limit: 37}
		for {
			p, err := m.ListDomains(q)
			require.NoError(t, err)
			for _, d := range p.Domains {
				seen[d.Domain]++
			}
			if p.Next == "" {
				break
			}
			q.After = p.Next
		}
		for d, n := range seen {
			require.Equal(t, 1, n, "%s listed %d times", d, n)
		}
		for i := range stable {
			require.Equal(t, 1, seen[fmt.Sprintf("stable-%d", i)], "stable-%d", i)
		}
	}
	close(stop)
	wg.Wait()
}

// mustToken returns the token of domain's lease.
func mustToken(m *Manager, domain string) Token {
	info, err := m.Inspect(domain)
	if err != nil || !info.Leased {
		panic(fmt.Sprint(domain, info, err))
	}
	return info.Lease.Token
}
