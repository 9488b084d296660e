package worklease

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"strings"
)

// How the Manager lists. It keeps its domains in a hash table split into
// shards, with no order by key, and does not copy them to list them: it
// lists domains in the order of the table itself, shard by shard and, in a
// shard, by the domains' hashes (keys break ties), reading a shard's slots
// from where the cursor's hash would sit. That order is stable for the
// Manager's life, but not across a restart (hashes are seeded anew):
// a cursor from before a restart is refused with ErrInvalidCursor.
// Leases are listed from the shards' expiry indexes, which hold every
// lease with an expiry. Only dead letters newest first have no index:
// that order visits every domain for every page.

// listBudget is how many domains a page of ListDomains, or of
// ListDeadLetters or ListLeases in domain order, looks at before it stops
// short: a filter that few domains match then costs a page about as
// much as a full one (BenchmarkListDomains).
const listBudget = 4096

// The kinds of the Manager's cursors.
const (
	cursorDomains         = 'd'
	cursorLeases          = 'l'
	cursorDeadLetters     = 'x' // every domain's, by domain
	cursorDomainDead      = 'o' // one domain's
	cursorDeadNewestFirst = 't'
)

// cursorTag is the part of every cursor that names the Manager that
// issued it: a hash of a fixed text under the Manager's seed.
func (m *Manager) cursorTag() uint32 {
	return uint32(m.seed.sum("worklease cursor"))
}

func (m *Manager) newCursor(kind byte) *cursorWriter {
	w := &cursorWriter{}
	w.u8(kind)
	w.u32(m.cursorTag())
	return w
}

// readCursor starts reading cursor, of kind, for call op.
func (m *Manager) readCursor(op string, kind byte, cursor string) (cursorReader, error) {
	r := newCursorReader(cursor)
	k, tag := r.u8(), r.u32()
	switch {
	case !r.ok:
		return r, CursorError(op, "not a cursor")
	case k != kind:
		return r, CursorError(op, "a cursor of another call or query")
	case tag != m.cursorTag():
		return r, CursorError(op, "a cursor of another backend, or of this Manager before a restart")
	}
	return r, nil
}

// A domainPos is a place in the Manager's order of domains: shard, then
// hash, then key. {shard, 0, ""} is the start of the shard.
type domainPos struct {
	shard  int
	hash   uint64
	domain string
}

func (p *domainPos) write(w *cursorWriter) {
	w.u32(uint32(p.shard))
	w.u64(p.hash)
	w.rest(p.domain)
}

// readPos reads a domainPos that m issued.
func (m *Manager) readPos(op string, r *cursorReader) (domainPos, error) {
	p := domainPos{shard: int(r.u32()), hash: r.u64()}
	p.domain = r.rest()
	switch {
	case !r.ok:
		return p, CursorError(op, "cut short")
	case p.shard >= len(m.shards):
		return p, CursorError(op, "no such shard")
	case p.domain != "" && (m.hash(p.domain) != p.hash || int(p.hash&m.shardMask) != p.shard):
		return p, CursorError(op, "its domain does not match its place")
	}
	return p, nil
}

// ascend calls visit with every record after pos in the Manager's order
// of domains, until visit returns false. It returns the place of the last
// record visited, and whether it went past the last one. It holds no lock
// while visit runs.
//
// A record that is in the map for the whole call is visited once, in
// order; one added or removed meanwhile may be visited or not, and a
// visited record may have been dropped (see record.dropped).
func (m *Manager) ascend(pos domainPos, visit func(r *domainRecord) bool) (last domainPos, done bool) {
	last = pos
	for s := pos.shard; s < len(m.shards); s++ {
		if s != pos.shard {
			last = domainPos{shard: s}
		}
		t := m.shards[s].records.table.Load()
		if t == nil {
			continue
		}
		stopped := !t.ascend(last.hash, last.domain, func(h uint64, r *domainRecord) bool {
			last.hash, last.domain = h, r.domain
			return visit(r)
		})
		if stopped {
			return last, false
		}
	}
	return last, true
}

// A slotEntry is a record of a table, with its hash.
type slotEntry struct {
	hash uint64
	r    *domainRecord
}

// compareEntries orders slotEntries by hash, then key. It reads a key,
// which is a record's memory away, only for equal hashes.
func compareEntries(a, b slotEntry) int {
	if c := cmp.Compare(a.hash, b.hash); c != 0 {
		return c
	}
	return strings.Compare(a.r.domain, b.r.domain)
}

// ascend calls yield with the table's records whose (hash, key) comes after
// (hash, domain), in that order, until yield returns false; it returns
// false if yield did. It reads the slots as lookups do, without a lock.
//
// A record sits at its home slot (the top bits of its hash) or after it,
// with no empty slot in between (see domainMap): so the records of a run
// of full slots that an empty slot ends all have lower homes, and so lower
// hashes, than those of every later run. ascend reads the table from the
// home of hash on, sorts each run, and yields it. The run that wraps
// round the table's end is read last, with the records at the table's
// start whose home lies before its end. A slot filled while ascend reads
// can join two runs, which is still correct for the records that were
// there before; a record added meanwhile that would come out of order is
// left out.
func (t *domainTable) ascend(hash uint64, domain string, yield func(h uint64, r *domainRecord) bool) bool {
	after := slotEntry{hash: hash, r: &domainRecord{domain: domain}}
	var run []slotEntry
	flush := func() bool {
		slices.SortFunc(run, compareEntries)
		for _, e := range run {
			if compareEntries(e, after) <= 0 {
				continue // before the cursor, or a newcomer out of order
			}
			if !yield(e.hash, e.r) {
				return false
			}
			after = e
		}
		run = run[:0]
		return true
	}
	n := len(t.slots)
	for i := t.home(hash); i < n; i++ {
		h, r := t.load(i)
		if r == nil {
			if !flush() {
				return false
			}
			continue
		}
		if r == tombstone {
			continue
		}
		if t.home(h) > i {
			continue // wrapped round from the table's end: read below
		}
		run = append(run, slotEntry{h, r})
	}
	// The records at the table's start that wrapped round from its end
	// belong to the last run.
	for i := range n {
		h, r := t.load(i)
		if r == nil {
			break
		}
		if r != tombstone && t.home(h) > i {
			run = append(run, slotEntry{h, r})
		}
	}
	return flush()
}

// load returns slot i's record and its hash. A slot's hash is stored
// before its record, so reading the hash on both sides of the record and
// finding it the same proves it the record's: a slot filled again
// meanwhile changes it (or gives it the same value, which is then right).
func (t *domainTable) load(i int) (uint64, *domainRecord) {
	s := &t.slots[i]
	for {
		h := s.hash.Load()
		r := s.r.Load()
		if s.hash.Load() == h {
			return h, r
		}
	}
}

// summary describes r's domain. r.mu must be held.
func (m *Manager) summary(r *domainRecord) DomainSummary {
	s := &r.state
	d := DomainSummary{
		Domain:      r.domain,
		Leased:      s.leased,
		Paused:      s.paused,
		Queued:      int64(s.backlog.len()),
		DeadLetters: s.failed().len(),
	}
	if s.leased {
		d.Lease = s.lease.info(r.domain, s.leaseToken(&m.policy), m.loc)
	}
	d.Head, _ = s.backlog.front()
	return d
}

// ListDomains returns a page of the domains that q asks for, in the
// Manager's order (see Backend.ListDomains). A page looks at up to 4,096
// domains before it stops short; it locks one domain at a time, and does
// not revoke expired leases.
func (m *Manager) ListDomains(q DomainQuery) (DomainPage, error) {
	const op = "ListDomains"
	if err := m.checkOpen(); err != nil {
		return DomainPage{}, err
	}
	limit, err := PageLimit(op, q.Limit)
	if err != nil {
		return DomainPage{}, err
	}
	var pos domainPos
	if q.After != "" {
		r, err := m.readCursor(op, cursorDomains, q.After)
		if err != nil {
			return DomainPage{}, err
		}
		if pos, err = m.readPos(op, &r); err != nil {
			return DomainPage{}, err
		}
	}
	var page DomainPage
	var seq uint64 // the latest record what we report depends on
	looked := 0
	last, done := m.ascend(pos, func(r *domainRecord) bool {
		looked++
		if strings.HasPrefix(r.domain, q.Prefix) {
			r.mu.Lock()
			if !r.dropped {
				if d := m.summary(r); d.State()&q.State == q.State {
					page.Domains = append(page.Domains, d)
					seq = max(seq, r.lastSeq)
				}
			}
			r.mu.Unlock()
		}
		return len(page.Domains) < limit && looked < listBudget
	})
	if !done {
		w := m.newCursor(cursorDomains)
		last.write(w)
		page.Next = w.String()
	}
	if err := m.waitDurable(seq, nil); err != nil {
		return DomainPage{}, err
	}
	return page, nil
}

// A leaseKey is a lease's place in ListLeases' order, among those that
// expire: its expiry, then its domain.
type leaseKey struct {
	at instant
	r  *domainRecord
}

func compareLeaseKeys(a, b leaseKey) int {
	if c := cmp.Compare(a.at, b.at); c != 0 {
		return c
	}
	return strings.Compare(a.r.domain, b.r.domain)
}

// leaseHeap is a max-heap of leaseKeys: the best candidates for a page so
// far, the last of them on top.
type leaseHeap []leaseKey

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return compareLeaseKeys(h[i], h[j]) > 0 }
func (h leaseHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *leaseHeap) Push(x any)        { *h = append(*h, x.(leaseKey)) }
func (h *leaseHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// ListLeases returns a page of the leases in flight, the soonest to expire
// first (see Backend.ListLeases). A Manager with a lease TTL reads them
// from its expiry indexes: a page costs about as much as the leases that
// come before it, and no more. Leases that never expire come last, in the
// order of ListDomains, looking at up to 4,096 domains a page.
func (m *Manager) ListLeases(q LeaseQuery) (LeasePage, error) {
	const op = "ListLeases"
	if err := m.checkOpen(); err != nil {
		return LeasePage{}, err
	}
	limit, err := PageLimit(op, q.Limit)
	if err != nil {
		return LeasePage{}, err
	}
	// The cursor is in one of two phases: 1, the leases with an expiry,
	// after (at, domain); 2, those without, after a place in the order of
	// domains.
	phase, after := uint8(1), leaseKey{r: &domainRecord{}}
	var pos domainPos
	if q.After != "" {
		r, err := m.readCursor(op, cursorLeases, q.After)
		if err != nil {
			return LeasePage{}, err
		}
		switch phase = r.u8(); phase {
		case 1:
			after.at = instant(r.u64())
			after.r = &domainRecord{domain: r.rest()}
			if !r.ok {
				return LeasePage{}, CursorError(op, "cut short")
			}
		case 2:
			if pos, err = m.readPos(op, &r); err != nil {
				return LeasePage{}, err
			}
		default:
			return LeasePage{}, CursorError(op, "no such phase")
		}
	}
	var page LeasePage
	var seq uint64
	if phase == 1 && m.expiring {
		best := m.soonestLeases(after, limit)
		for _, k := range best {
			r := k.r
			r.mu.Lock()
			if s := &r.state; !r.dropped && s.leased && s.lease.expiresAt == k.at {
				page.Leases = append(page.Leases, s.lease.info(r.domain, s.leaseToken(&m.policy), m.loc))
				seq = max(seq, r.lastSeq)
			}
			r.mu.Unlock()
		}
		if len(best) == limit {
			w := m.newCursor(cursorLeases)
			w.u8(1)
			w.u64(uint64(best[len(best)-1].at))
			w.rest(best[len(best)-1].r.domain)
			page.Next = w.String()
			return page, m.waitDurable(seq, nil)
		}
	}
	// The leases that never expire: every lease, if the Manager has no
	// TTL (one restored from a journal written with one included).
	looked := 0
	last, done := m.ascend(pos, func(r *domainRecord) bool {
		looked++
		r.mu.Lock()
		if s := &r.state; !r.dropped && s.leased && (s.lease.expiresAt == 0 || !m.expiring) {
			page.Leases = append(page.Leases, s.lease.info(r.domain, s.leaseToken(&m.policy), m.loc))
			seq = max(seq, r.lastSeq)
		}
		r.mu.Unlock()
		return len(page.Leases) < limit && looked < listBudget
	})
	if !done {
		w := m.newCursor(cursorLeases)
		w.u8(2)
		last.write(w)
		page.Next = w.String()
	}
	if err := m.waitDurable(seq, nil); err != nil {
		return LeasePage{}, err
	}
	return page, nil
}

// soonestLeases returns, in order, the first limit leases of the shards'
// expiry indexes that come after after. A shard's index is a heap: it
// walks each one from its top, and leaves out every branch whose top comes
// after the limit-th best lease found so far, so it reads the leases that
// come before after, and few more.
func (m *Manager) soonestLeases(after leaseKey, limit int) []leaseKey {
	best := make(leaseHeap, 0, limit)
	var stack []int
	for i := range m.shards {
		x := &m.shards[i].expiry
		x.mu.Lock()
		stack = append(stack[:0], 0)
		for len(stack) > 0 {
			j := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if j >= len(x.heap) {
				continue
			}
			e := leaseKey{at: x.heap[j].at, r: x.heap[j].r}
			if len(best) == limit && e.at > best[0].at {
				continue // as is every lease below it
			}
			if compareLeaseKeys(e, after) > 0 {
				switch {
				case len(best) < limit:
					heap.Push(&best, e)
				case compareLeaseKeys(e, best[0]) < 0:
					best[0] = e
					heap.Fix(&best, 0)
				}
			}
			stack = append(stack, 2*j+1, 2*j+2)
		}
		x.mu.Unlock()
	}
	slices.SortFunc(best, compareLeaseKeys)
	return best
}

// ListDeadLetters returns a page of the dead letters q asks for (see
// Backend.ListDeadLetters). One domain's are read from its record: a page
// costs about as much as its dead letters. Every domain's by domain look at
// up to 4,096 domains a page, as ListDomains does; newest first visits
// every domain for each page, as the Manager keeps no index of them by
// time. Payloads are copies, the caller's to keep.
func (m *Manager) ListDeadLetters(q DeadLetterQuery) (DeadLetterPage, error) {
	const op = "ListDeadLetters"
	if err := m.checkOpen(); err != nil {
		return DeadLetterPage{}, err
	}
	limit, err := PageLimit(op, q.Limit)
	if err != nil {
		return DeadLetterPage{}, err
	}
	switch {
	case q.Domain != "":
		return m.listDomainDeadLetters(q, limit)
	case q.Order == DeadLettersByDomain:
		return m.listDeadLettersByDomain(q, limit)
	case q.Order == DeadLettersNewestFirst:
		return m.listDeadLettersNewestFirst(q, limit)
	}
	return DeadLetterPage{}, &QueryError{Op: op, Err: ErrInvalidCursor, Detail: "no such order: " + q.Order.String()}
}

// deadLetter appends offset's dead letter in d, of domain, to dls, and if
// withPayload, its payload to reads, for the caller to read once it has
// released the domain's lock (see readPayloads).
func (m *Manager) deadLetter(dls []DeadLetter, reads *[]payloadRead, d *deadLetters, s *domainState, domain string, offset int64,
	withPayload bool,
) []DeadLetter {
	dl := d.m[offset]
	if pl, ok := s.payloadOf(offset); ok && withPayload {
		*reads = append(*reads, payloadRead{len(dls), domain, offset, pl})
	}
	return append(dls, DeadLetter{Domain: domain, Offset: offset, Cause: dl.cause, Attempts: dl.attempts, At: dl.at.in(m.loc)})
}

// readDeadLetterPayloads reads the payloads of a page's dead letters.
func (m *Manager) readDeadLetterPayloads(page *DeadLetterPage, reads []payloadRead) error {
	return m.readPayloads(reads, func(i int) *[]byte { return &page.DeadLetters[i].Payload })
}

// finishDeadLetterPage returns page once what it shows is durable (seq is
// the journal record of the latest change it reflects), with its
// payloads read.
func (m *Manager) finishDeadLetterPage(page DeadLetterPage, seq uint64, reads []payloadRead) (DeadLetterPage, error) {
	if err := m.waitDurable(seq, nil); err != nil {
		return DeadLetterPage{}, err
	}
	if err := m.readDeadLetterPayloads(&page, reads); err != nil {
		return DeadLetterPage{}, err
	}
	return page, nil
}

// offsetsAfter returns, in order, up to n+1 of d's offsets above after: n
// for the page, and one more if more follow.
func offsetsAfter(d *deadLetters, after int64, n int) []int64 {
	if d == nil {
		return nil
	}
	if len(d.m) <= 4*(n+1) {
		var out []int64
		for off := range d.m {
			if off > after {
				out = append(out, off)
			}
		}
		slices.Sort(out)
		return out[:min(len(out), n+1)]
	}
	// Many: keep the n+1 lowest in a max-heap.
	h := make(offsetHeap, 0, n+1)
	for off := range d.m {
		switch {
		case off <= after:
		case len(h) < n+1:
			heap.Push(&h, off)
		case off < h[0]:
			h[0] = off
			heap.Fix(&h, 0)
		}
	}
	slices.Sort(h)
	return h
}

// offsetHeap is a max-heap of offsets.
type offsetHeap []int64

func (h offsetHeap) Len() int           { return len(h) }
func (h offsetHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h offsetHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *offsetHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *offsetHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// The listings' calls on one domain, as call.go describes calls.
var (
	callListDeadLetters   = callSpec{"ListDeadLetters", 0, nil, nil}
	callInspectDeadLetter = callSpec{"InspectDeadLetter", 0, nil, nil}
)

// listDomainDeadLetters is ListDeadLetters of one domain.
func (m *Manager) listDomainDeadLetters(q DeadLetterQuery, limit int) (DeadLetterPage, error) {
	const op = "ListDeadLetters"
	if !m.accepts(q.Domain, 0) {
		return DeadLetterPage{}, m.refuse(&callListDeadLetters, q.Domain, 0)
	}
	after := int64(-1)
	if q.After != "" {
		r, err := m.readCursor(op, cursorDomainDead, q.After)
		if err != nil {
			return DeadLetterPage{}, err
		}
		after = int64(r.u64())
		if !r.ok || after < 0 || len(r.b) != 0 {
			return DeadLetterPage{}, CursorError(op, "not an offset")
		}
	}
	var page DeadLetterPage
	var reads []payloadRead
	_, r := m.lockRecord(q.Domain, false)
	if r == nil {
		return page, m.absent(nil)
	}
	s := &r.state
	offs := offsetsAfter(s.failed(), after, limit)
	for _, off := range offs[:min(len(offs), limit)] {
		page.DeadLetters = m.deadLetter(page.DeadLetters, &reads, s.failed(), s, q.Domain, off, q.Payloads)
	}
	seq := r.lastSeq
	r.mu.Unlock()
	if len(offs) > limit {
		w := m.newCursor(cursorDomainDead)
		w.u64(uint64(offs[limit-1]))
		page.Next = w.String()
	}
	return m.finishDeadLetterPage(page, seq, reads)
}

// listDeadLettersByDomain is ListDeadLetters of every domain, by domain.
// Its cursor is a place in the order of domains and an offset: the page
// ended in that domain after that offset (-1 if it ended after the whole
// domain).
func (m *Manager) listDeadLettersByDomain(q DeadLetterQuery, limit int) (DeadLetterPage, error) {
	const op = "ListDeadLetters"
	var pos domainPos
	var pending *domainRecord // the domain the previous page ended in, if any
	after := int64(-1)
	if q.After != "" {
		r, err := m.readCursor(op, cursorDeadLetters, q.After)
		if err != nil {
			return DeadLetterPage{}, err
		}
		after = int64(r.u64())
		if pos, err = m.readPos(op, &r); err != nil {
			return DeadLetterPage{}, err
		}
		if after >= 0 && pos.domain != "" {
			pending = m.shards[pos.shard].records.get(pos.hash, pos.domain)
		}
	}
	var page DeadLetterPage
	var reads []payloadRead
	var seq uint64
	stopAt := int64(-1) // the offset the page stopped at within a domain
	// take adds r's dead letters above from to the page, and reports
	// whether the page has room for more.
	take := func(r *domainRecord, from int64) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.dropped {
			return true
		}
		s := &r.state
		room := limit - len(page.DeadLetters)
		offs := offsetsAfter(s.failed(), from, room)
		for _, off := range offs[:min(len(offs), room)] {
			page.DeadLetters = m.deadLetter(page.DeadLetters, &reads, s.failed(), s, r.domain, off, q.Payloads)
		}
		if len(offs) > 0 {
			seq = max(seq, r.lastSeq)
		}
		if len(offs) > room {
			stopAt = offs[room-1]
			return false
		}
		return len(page.DeadLetters) < limit
	}
	if pending != nil && !take(pending, after) {
		return m.deadLettersByDomainPage(page, reads, &pos, stopAt, seq)
	}
	looked := 0
	last, done := m.ascend(pos, func(r *domainRecord) bool {
		looked++
		return take(r, -1) && looked < listBudget
	})
	if done {
		return m.deadLettersByDomainPage(page, reads, nil, stopAt, seq)
	}
	return m.deadLettersByDomainPage(page, reads, &last, stopAt, seq)
}

// deadLettersByDomainPage ends a page of listDeadLettersByDomain that
// stopped at pos, after offset stopAt of its domain (-1: after all of it),
// or, with a nil pos, at the end; reads are its payloads to read.
func (m *Manager) deadLettersByDomainPage(page DeadLetterPage, reads []payloadRead, pos *domainPos, stopAt int64, seq uint64) (DeadLetterPage, error) {
	if pos != nil {
		w := m.newCursor(cursorDeadLetters)
		w.u64(uint64(stopAt))
		pos.write(w)
		page.Next = w.String()
	}
	return m.finishDeadLetterPage(page, seq, reads)
}

// A deadKey is a dead letter's place in the order newest first: latest
// failure first, then domain and offset from the highest.
type deadKey struct {
	at     instant
	domain string
	offset int64
}

// compareNewest orders deadKeys newest first.
func compareNewest(a, b deadKey) int {
	if c := cmp.Compare(b.at, a.at); c != 0 {
		return c
	}
	if c := strings.Compare(b.domain, a.domain); c != 0 {
		return c
	}
	return cmp.Compare(b.offset, a.offset)
}

// deadHeap is a heap of the best dead letters for a page so far, the one
// that comes last on top.
type deadHeap []deadKey

func (h deadHeap) Len() int           { return len(h) }
func (h deadHeap) Less(i, j int) bool { return compareNewest(h[i], h[j]) > 0 }
func (h deadHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadHeap) Push(x any)        { *h = append(*h, x.(deadKey)) }
func (h *deadHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// listDeadLettersNewestFirst is ListDeadLetters of every domain, newest
// first: it visits the domains with dead letters (each shard keeps a set
// of them), keeping the best limit+1 after the cursor, which each domain
// keeps in the order they failed, then reads them again for the page.
func (m *Manager) listDeadLettersNewestFirst(q DeadLetterQuery, limit int) (DeadLetterPage, error) {
	const op = "ListDeadLetters"
	var after *deadKey
	if q.After != "" {
		r, err := m.readCursor(op, cursorDeadNewestFirst, q.After)
		if err != nil {
			return DeadLetterPage{}, err
		}
		k := deadKey{at: instant(r.u64()), offset: int64(r.u64())}
		k.domain = r.rest()
		if !r.ok || k.domain == "" {
			return DeadLetterPage{}, CursorError(op, "cut short")
		}
		after = &k
	}
	best := make(deadHeap, 0, limit+1)
	var seq uint64
	records := m.deadCandidates(after, limit+1)
	// The domains that failed last first: once the page is full, a domain
	// whose latest failure is older than the page's oldest has none for it,
	// and neither have the domains after it.
	slices.SortFunc(records, func(a, b deadRecord) int { return cmp.Compare(b.latest, a.latest) })
	for _, dr := range records {
		if len(best) == limit+1 && dr.latest < best[0].at {
			break
		}
		r := dr.r
		r.mu.Lock()
		if d := r.state.failed(); !r.dropped && d.len() > 0 {
			seq = max(seq, r.lastSeq)
			// A domain's dead letters newest first are its byTime from
			// the end; those after the cursor end where a binary search
			// says, and the best of them for the page come first.
			end := len(d.byTime)
			if after != nil {
				end, _ = slices.BinarySearchFunc(d.byTime, *after, func(t timedOffset, a deadKey) int {
					return compareNewest(a, deadKey{at: t.at, domain: r.domain, offset: t.offset})
				})
			}
			for i := end - 1; i >= 0; i-- {
				k := deadKey{at: d.byTime[i].at, domain: r.domain, offset: d.byTime[i].offset}
				if len(best) < limit+1 {
					heap.Push(&best, k)
					continue
				}
				if compareNewest(k, best[0]) >= 0 {
					break // the rest of the domain's are older still
				}
				best[0] = k
				heap.Fix(&best, 0)
			}
		}
		r.mu.Unlock()
	}
	slices.SortFunc(best, compareNewest)
	var page DeadLetterPage
	var reads []payloadRead
	for _, k := range best[:min(len(best), limit)] {
		_, r := m.lockRecord(k.domain, false)
		if r == nil {
			continue
		}
		if d := r.state.failed(); d.contains(k.offset) && d.m[k.offset].at == k.at {
			page.DeadLetters = m.deadLetter(page.DeadLetters, &reads, d, &r.state, k.domain, k.offset, q.Payloads)
		}
		r.mu.Unlock()
	}
	if len(best) > limit {
		k := best[limit-1]
		w := m.newCursor(cursorDeadNewestFirst)
		w.u64(uint64(k.at))
		w.u64(uint64(k.offset))
		w.rest(k.domain)
		page.Next = w.String()
	}
	return m.finishDeadLetterPage(page, seq, reads)
}

// InspectDeadLetter returns the dead letter of offset in domain, with its
// payload if it was enqueued with one (a copy, the caller's to keep). It
// returns an error matching ErrNotDeadLettered if the offset is not
// failed. Like DeadLetters, it revokes no expired lease.
func (m *Manager) InspectDeadLetter(domain string, offset int64) (DeadLetter, error) {
	const op = "InspectDeadLetter"
	if !m.accepts(domain, offset) {
		return DeadLetter{}, m.refuse(&callInspectDeadLetter, domain, offset)
	}
	_, r := m.lockRecord(domain, false)
	if r == nil {
		if err := m.absent(nil); err != nil {
			return DeadLetter{}, err
		}
		return DeadLetter{}, domainError(op, domain, ErrNotDeadLettered)
	}
	var page DeadLetterPage
	var reads []payloadRead
	d := r.state.failed()
	found := d.contains(offset)
	if found {
		page.DeadLetters = m.deadLetter(nil, &reads, d, &r.state, domain, offset, true)
	}
	seq := r.lastSeq
	r.mu.Unlock()
	if err := m.waitDurable(seq, nil); err != nil {
		return DeadLetter{}, err
	}
	if !found {
		return DeadLetter{}, domainError(op, domain, ErrNotDeadLettered)
	}
	if err := m.readDeadLetterPayloads(&page, reads); err != nil {
		return DeadLetter{}, err
	}
	return page.DeadLetters[0], nil
}

// Totals returns how much the Manager holds. It locks one domain at a
// time, so under load it is not a snapshot of one instant, and visits
// every domain, as Stats does.
func (m *Manager) Totals() (Totals, error) {
	if err := m.checkOpen(); err != nil {
		return Totals{}, err
	}
	var t Totals
	var seq uint64
	m.ascend(domainPos{}, func(r *domainRecord) bool {
		r.mu.Lock()
		if s := &r.state; !r.dropped {
			t.Domains++
			if s.leased {
				t.Leased++
			}
			if s.paused {
				t.Paused++
			}
			t.Queued += int64(s.backlog.len())
			t.DeadLetters += s.failed().len()
			seq = max(seq, r.lastSeq)
		}
		r.mu.Unlock()
		return true
	})
	if err := m.waitDurable(seq, nil); err != nil {
		return Totals{}, err
	}
	return t, nil
}

// deadCandidates returns the records with dead letters that may have one
// of the n newest after the cursor after (nil: from the newest), with the
// time of each one's latest failure. A domain whose latest failure is
// before the cursor's has that one after the cursor, so the n latest of
// such domains set a bar: a domain whose latest failure is older than the
// n-th has none among the n newest. Domains whose latest failure is not
// before the cursor's may have any, and are all candidates. The shards'
// sets are read twice, once for the bar and once for the candidates; a
// domain that fails meanwhile is newer than the page.
func (m *Manager) deadCandidates(after *deadKey, n int) []deadRecord {
	straddles := func(latest instant) bool { return after != nil && latest >= after.at }
	bar := make(instantHeap, 0, n)
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for _, latest := range sh.dead {
			switch {
			case straddles(latest):
			case len(bar) < n:
				heap.Push(&bar, latest)
			case latest > bar[0]:
				bar[0] = latest
				heap.Fix(&bar, 0)
			}
		}
		sh.mu.Unlock()
	}
	least := instant(math.MinInt64)
	if len(bar) == n {
		least = bar[0]
	}
	var out []deadRecord
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for r, latest := range sh.dead {
			if latest >= least || straddles(latest) {
				out = append(out, deadRecord{r, latest})
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// instantHeap is a min-heap of instants.
type instantHeap []instant

func (h instantHeap) Len() int           { return len(h) }
func (h instantHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h instantHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *instantHeap) Push(x any)        { *h = append(*h, x.(instant)) }
func (h *instantHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
