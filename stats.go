package worklease

import "sync/atomic"

// Stats are counts of transitions since New, summed over all domains. Each
// field counts the events of one EventKind. A Manager rebuilt from a journal
// counts from zero: replay reports no new transitions.
type Stats struct {
	Acquired     uint64 // leases granted
	Enqueued     uint64 // offsets queued (duplicates not counted)
	Processed    uint64 // offsets that succeeded
	Retried      uint64 // retries scheduled by Fail
	DeadLettered uint64 // offsets given up on or killed
	Expired      uint64 // leases revoked because their time ran out
	Requeued     uint64 // offsets put back at the front after an expiry or a forced release
	Extended     uint64 // lease expiries moved later
	Rejected     uint64 // Succeed, Fail or Extend refused for a stale or wrong token on a known domain
	OutOfOrder   uint64 // best-effort grants of an offset other than the backlog's head
	Killed       uint64 // offsets killed by an operator
	Redriven     uint64 // dead letters put back by an operator
	Released     uint64 // leases taken back by an operator
	Paused       uint64 // domains paused or parked
	Resumed      uint64 // domains resumed
	Forgotten    uint64 // domains forgotten
	Cancelled    uint64 // offsets cancelled (see Cancel)
}

// counters are one shard's event counts: those of its forgotten domains,
// and those of the kinds a record does not count itself.
type counters [numEventKinds]atomic.Uint64

func (c *counters) add(k EventKind, n uint64) { c[k].Add(n) }

// recordCounts are the counts of the kinds a record counts itself: those
// that happen on nearly every call. Kept in the record, which the call has
// locked, their cache line stays with the goroutine working on the domain;
// a count per shard would move between cores on every call. A record holds
// them in 32 bits each, to stay in its first two cache lines, and counts
// each wrap around in its extra part's wraps, which only a domain's four
// billionth event of a kind touches. They are guarded by the record's mu; once Forget
// dropped the record, they no longer change.
type recordCounts [numHotKinds]uint32

// total returns the count of r's events of the i-th hot kind. r.mu must be
// held, or r's counts no longer change.
func (r *domainRecord) total(i int) uint64 {
	if r.extra == nil {
		return uint64(r.counts[i])
	}
	return uint64(r.extra.wraps[i])<<32 | uint64(r.counts[i])
}

// hotKinds are the kinds in recordCounts, by index.
var hotKinds = [...]EventKind{EventAcquired, EventEnqueued, EventProcessed}

const numHotKinds = 3

// hotIndex holds each kind's index in recordCounts, or -1 for a kind a
// record does not count itself. It has a slot for every value of an
// EventKind, so that reading it needs no bounds check.
var hotIndex = func() (idx [256]int8) {
	for k := range idx {
		idx[k] = -1
	}
	for i, k := range hotKinds {
		idx[k] = int8(i)
	}
	return idx
}()

// countAll counts the changes st made to r, a record of sh locked by the
// caller. Most calls make one, which it counts in place.
func (sh *shard) countAll(r *domainRecord, st *step) {
	if st.n > 0 {
		sh.count(r, st.kinds[0])
	}
	if st.n > 1 {
		sh.countRest(r, st)
	}
}

// countRest counts the changes st made after its first.
func (sh *shard) countRest(r *domainRecord, st *step) {
	for i := 1; i < st.n; i++ {
		sh.count(r, st.kind(i))
	}
}

// countHot counts one event of kind k on r, a record of sh locked by the
// caller, if k is one of the kinds r counts itself, which it reports.
func (sh *shard) countHot(r *domainRecord, k EventKind) bool {
	i := hotIndex[k]
	if i < 0 {
		return false
	}
	r.countHot(i)
	return true
}

// countHotPair counts the two changes of st, a step on r, a record of sh
// locked by the caller, if both are of kinds r counts itself, which it
// reports; otherwise it counts neither. SucceedNext's step is such a pair.
func (sh *shard) countHotPair(r *domainRecord, st *step) bool {
	i, j := hotIndex[st.kinds[0]], hotIndex[st.kinds[1]]
	if i < 0 || j < 0 {
		return false
	}
	r.countHot(i)
	r.countHot(j)
	return true
}

// countHot adds one event of the i-th hot kind to r's counts; r.mu must be
// held.
func (r *domainRecord) countHot(i int8) {
	if r.counts[i]++; r.counts[i] == 0 {
		r.wrapped(int(i))
	}
}

// count adds one event of kind k on r, a record of sh locked by the caller.
func (sh *shard) count(r *domainRecord, k EventKind) {
	if i := hotIndex[k]; i >= 0 {
		r.countHot(i)
		return
	}
	sh.stats.add(k, 1)
}

// wrapped counts a wrap around of r's count of the i-th hot kind.
func (r *domainRecord) wrapped(i int) {
	if r.extra == nil {
		r.extra = &recordExtra{}
	}
	r.extra.wraps[i]++
}

// retire adds the counts of r, a dropped record leaving sh's map, to sh's.
// sh.mu must be held (see Stats). r.mu need not be: the caller locked it
// after r's counts last changed.
func (sh *shard) retire(r *domainRecord) {
	for i, k := range hotKinds {
		sh.stats.add(k, r.total(i))
	}
}

// Stats returns the counts of transitions so far. It reads the counters
// one domain at a time, so under load the fields may be from slightly
// different moments; no count ever goes down. It visits every domain, so
// its cost grows with their number (BenchmarkStats: about 7ms per 100,000
// domains): cheap enough for metrics, not for every operation. It holds
// each shard's lock while it lists the shard's domains, which new domains
// there wait for.
//
// Unlike the other calls, Stats has no error to return: after Close, and
// after the journal failed, it keeps answering with the counts so far,
// which stop growing once the calls under way then have returned (every
// later call is refused, and a refused call counts nothing).
func (m *Manager) Stats() Stats {
	if m == nil {
		return Stats{}
	}
	var sum [numEventKinds]uint64
	var live []*domainRecord
	for i := range m.shards {
		sh := &m.shards[i]
		// The shard's counts and its records at one moment: a record's
		// counts move to its shard as it leaves the map, under sh.mu.
		sh.mu.Lock()
		for k := range sum {
			sum[k] += sh.stats[k].Load()
		}
		live = live[:0]
		sh.records.all(func(_ uint64, r *domainRecord) { live = append(live, r) })
		sh.mu.Unlock()
		// A record that leaves the map from now on keeps its counts, and
		// the shard's counts read above do not include them.
		for _, r := range live {
			r.mu.Lock()
			for i, k := range hotKinds {
				sum[k] += r.total(i)
			}
			r.mu.Unlock()
		}
	}
	return Stats{
		Acquired:     sum[EventAcquired],
		Enqueued:     sum[EventEnqueued],
		Processed:    sum[EventProcessed],
		Retried:      sum[EventRetrying],
		DeadLettered: sum[EventDeadLettered],
		Expired:      sum[EventExpired],
		Requeued:     sum[EventRequeued],
		Extended:     sum[EventExtended],
		Rejected:     sum[EventRejected],
		OutOfOrder:   sum[EventOutOfOrder],
		Killed:       sum[EventKilled],
		Redriven:     sum[EventRedriven],
		Released:     sum[EventReleased],
		Paused:       sum[EventPaused],
		Resumed:      sum[EventResumed],
		Forgotten:    sum[EventForgotten],
		Cancelled:    sum[EventCancelled],
	}
}
