package worklease

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// snapshotter runs a journaled Manager's snapshots: one at a time, either on
// demand (Manager.Snapshot) or in a goroutine of its own when the journal
// says one is due; Close waits for it.
type snapshotter struct {
	run     sync.Mutex     // held for the whole of a snapshot: one at a time
	started atomic.Bool    // a background snapshot is under way
	bg      sync.WaitGroup // the background snapshot, for Close

	mu       sync.Mutex        // guards stopped, tracking and dropped
	stopped  bool              // Close has begun: start no snapshot
	tracking bool              // a snapshot is under way: remember Forget calls
	dropped  []forgottenDomain // domains Forget dropped while it runs
}

// A forgottenDomain is a domain Forget dropped while a snapshot was being
// written: the snapshot may miss it, so replay must skip its records up to
// the Forget, which the snapshot no longer has the state to apply.
type forgottenDomain struct {
	domain string
	seq    uint64 // the Forgotten record
}

// maybeStart starts a background snapshot if the journal wants one and none
// is under way.
func (s *snapshotter) maybeStart(m *Manager) {
	if !m.journal.SnapshotDue() || !s.started.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		s.started.Store(false)
		return
	}
	s.bg.Go(func() {
		defer s.started.Store(false)
		// A failure here leaves the journal as it was (the journal decides
		// when to ask again), or fails it, which the next call reports.
		_ = m.writeSnapshot()
	})
}

// stop starts no more snapshots and waits for one under way.
func (s *snapshotter) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.bg.Wait()
}

// forgotten notes that Forget dropped domain with the record seq.
func (s *snapshotter) forgotten(domain string, seq uint64) {
	s.mu.Lock()
	if s.tracking {
		s.dropped = append(s.dropped, forgottenDomain{domain, seq})
	}
	s.mu.Unlock()
}

// Snapshot writes the Manager's whole state to its journal, which may then
// drop the records the snapshot covers, so that the journal stops growing
// and replay gets faster. The journal also asks for snapshots by itself as
// it grows (see the wal package); Snapshot is for taking one now, e.g.
// before a planned restart. Calls go on while it runs. Without a journal it
// does nothing.
func (m *Manager) Snapshot() error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	if m.journal == nil {
		return nil
	}
	if m.settingsDue.Load() {
		// The journal does not state the Manager's rule yet (see
		// RecordSettings), and a journal with no record since its last
		// snapshot may write none: the settings record is a new one.
		if err := m.appendSettings(); err != nil {
			return m.waitDurable(0, err)
		}
	}
	return m.writeSnapshot()
}

func (m *Manager) writeSnapshot() error {
	s := &m.snapshots
	s.run.Lock()
	defer s.run.Unlock()
	s.mu.Lock()
	s.tracking, s.dropped = true, nil
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.tracking, s.dropped = false, nil
		s.mu.Unlock()
	}()
	// The journal fixes the sequence number the snapshot covers before it
	// calls write. Every record up to it is then reflected in a domain's state
	// by the time write locks the domain, or the domain is in s.forgotten.
	if m.payloads != nil {
		return m.payloads.SnapshotStateKeeping(func(w io.Writer, keep func(seq uint64)) error {
			bw := bufio.NewWriterSize(w, 64<<10)
			if err := m.encodeSnapshot(bw, keep); err != nil {
				return err
			}
			return bw.Flush()
		})
	}
	return m.journal.SnapshotState(func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 64<<10)
		if err := m.encodeSnapshot(bw, nil); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// The snapshot format. After snapshotMagic and its version, a sequence of
// sections, each a tag byte: snapshotDomain sections, then one
// snapshotTrailer, then snapshotEnd. Version 2 has a byte of settings
// after the version (snapshotMonotonic: the state is under
// WithMonotonicOffsets' rule, as are the records after it until a
// RecordSettings record says otherwise), and stores the attempts made by
// the offset in flight and by each offset a domain carries as well as
// their failed ones. Version 3, the one encodeSnapshot writes, adds to
// each domain what its producers stored: its payloads (each the bytes, or
// the sequence number of the journal record that holds them), its
// schedules, its retry delay and its idempotency keys (see
// appendSnapshot). Versions 1 and 2 still restore, with none of these;
// version 1 under the rule of the Manager restoring it, with the attempts
// made counted from the failed ones (one more for the offset in flight,
// as many for a carried one).
const (
	snapshotMagic    = "wlsnap"
	snapshotVersion1 = 1
	snapshotVersion2 = 2
	snapshotVersion  = 3

	snapshotMonotonic = 1 // the bit of the settings byte

	snapshotEnd     = 0
	snapshotDomain  = 1
	snapshotTrailer = 2

	// revokedErr in a snapshot.
	revokedNone    = 0
	revokedExpired = 1
	revokedByAdmin = 2

	// How a payload is stored in a snapshot.
	payloadInline = 0 // its bytes follow
	payloadHeld   = 1 // the sequence number of the journal record holding it follows
)

// encodeSnapshot writes every domain, locking one at a time, then the
// Manager's counters and the domains forgotten meanwhile. It calls keep,
// if not nil, with each journal record whose payload it refers to.
func (m *Manager) encodeSnapshot(w io.Writer, keep func(seq uint64)) error {
	// The floor as the snapshot begins: every domain created after this
	// started at or above it (see replayState).
	floor := m.fenceFloor.Load()
	var settings byte
	if m.policy.monotonic {
		settings |= snapshotMonotonic
	}
	buf := append([]byte(snapshotMagic), snapshotVersion, settings)
	var err error
	flush := func() {
		if err == nil && len(buf) > 0 {
			_, err = w.Write(buf)
		}
		buf = buf[:0]
	}
	m.forEachRecord(func(_ *shard, domain string, r *domainRecord) {
		if err != nil {
			return
		}
		r.mu.Lock()
		if !r.dropped {
			buf = append(buf, snapshotDomain)
			buf = r.appendSnapshot(buf, &m.policy, domain, keep)
		}
		r.mu.Unlock()
		flush()
	})
	if err != nil {
		return err
	}
	m.snapshots.mu.Lock()
	forgotten := m.snapshots.dropped
	m.snapshots.dropped = nil
	m.snapshots.mu.Unlock()
	buf = append(buf, snapshotTrailer)
	buf = binary.AppendUvarint(buf, floor)
	buf = binary.AppendUvarint(buf, m.domainSerial.Load())
	buf = binary.AppendUvarint(buf, uint64(len(forgotten)))
	for _, f := range forgotten {
		buf = appendString(buf, f.domain)
		buf = binary.AppendUvarint(buf, f.seq)
	}
	buf = append(buf, snapshotEnd)
	flush()
	return err
}

// appendSnapshot appends one domain's state under p, calling keep, if not
// nil, with each journal record that holds one of its payloads. r.mu must
// be held.
func (r *domainRecord) appendSnapshot(b []byte, p *policy, domain string, keep func(seq uint64)) []byte {
	s := &r.state
	b = appendString(b, domain)
	b = binary.AppendUvarint(b, r.lastSeq)
	b = binary.AppendUvarint(b, s.issued.fence)
	b = appendBool(b, s.paused)
	b = appendBool(b, s.leased)
	if s.leased {
		l := &s.lease
		b = binary.AppendVarint(b, l.offset)
		b = appendToken(b, s.leaseToken(p))
		b = appendTime(b, l.acquiredAt.in(time.UTC))
		b = appendTime(b, l.expiresAt.in(time.UTC))
		b = binary.AppendUvarint(b, uint64(l.retries))
		b = binary.AppendUvarint(b, uint64(s.attempts()))
	}
	revoked, why := s.revoked()
	b = appendToken(b, revoked)
	switch why {
	case nil:
		b = append(b, revokedNone)
	case ErrLeaseExpired:
		b = append(b, revokedExpired)
	default:
		b = append(b, revokedByAdmin)
	}
	b = binary.AppendUvarint(b, uint64(s.backlog.len()))
	for i := range s.backlog.len() {
		b = binary.AppendVarint(b, s.backlog.at(i))
	}
	b = binary.AppendUvarint(b, uint64(s.processed.numRuns()))
	for _, run := range s.processed.runs() {
		b = binary.AppendVarint(b, run.lo)
		b = binary.AppendUvarint(b, uint64(run.hi-run.lo))
	}
	failed := s.failed()
	b = binary.AppendUvarint(b, uint64(failed.len()))
	for _, off := range failed.offsets() {
		dl := failed.m[off]
		b = binary.AppendVarint(b, off)
		b = binary.AppendUvarint(b, uint64(dl.attempts))
		b = appendTime(b, dl.at.in(time.UTC))
		b = appendString(b, textOf(dl.cause))
	}
	var carried map[int64]attempt
	if s.cold != nil {
		carried = s.cold.carried
	}
	b = binary.AppendUvarint(b, uint64(len(carried)))
	for off, a := range carried {
		b = binary.AppendVarint(b, off)
		b = binary.AppendUvarint(b, uint64(a.attempts))
		b = binary.AppendUvarint(b, uint64(a.retries))
		b = appendTime(b, a.acquiredAt.in(time.UTC))
	}
	return appendProduced(b, s, keep)
}

// appendProduced appends what version 3 adds to domain s: its payloads,
// each an offset and either payloadInline and the bytes or payloadHeld and
// a record's sequence number; its schedules, each an offset and a time;
// its retry delay's end, a time; and its keys, the oldest first, each the
// key, its offset, its payload's checksum (8 bytes, little-endian) and its
// time.
func appendProduced(b []byte, s *domainState, keep func(seq uint64)) []byte {
	c := s.cold
	if c == nil {
		return append(b, 0, 0, 0, 0) // none of each, and no retry delay
	}
	b = binary.AppendUvarint(b, uint64(len(c.payloads)))
	for off, pl := range c.payloads {
		b = binary.AppendVarint(b, off)
		if pl.seq != 0 {
			b = append(b, payloadHeld)
			b = binary.AppendUvarint(b, pl.seq)
			if keep != nil {
				keep(pl.seq)
			}
			continue
		}
		b = append(b, payloadInline)
		b = binary.AppendUvarint(b, uint64(len(pl.data)))
		b = append(b, pl.data...)
	}
	b = binary.AppendUvarint(b, uint64(len(c.scheduled)))
	for off, at := range c.scheduled {
		b = binary.AppendVarint(b, off)
		b = appendTime(b, at.in(time.UTC))
	}
	b = appendTime(b, c.retryAt.in(time.UTC))
	keys := c.keys.all()
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, key := range keys {
		k := c.keys.m[key]
		b = appendString(b, key)
		b = binary.AppendVarint(b, k.offset)
		b = binary.LittleEndian.AppendUint64(b, k.sum)
		b = appendTime(b, k.at.in(time.UTC))
	}
	return b
}

// restoreSnapshot rebuilds the Manager from a snapshot, before any record
// is replayed. It checks each domain's state against the invariants and
// returns the domains whose records up to a sequence number replay must
// skip.
func (m *Manager) restoreSnapshot(data []byte) (map[string]uint64, error) {
	d := decoder{b: data}
	if len(data) < len(snapshotMagic)+1 || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("not a worklease snapshot")
	}
	d.b = d.b[len(snapshotMagic):]
	version := d.byte()
	if version < snapshotVersion1 || version > snapshotVersion {
		return nil, fmt.Errorf("unknown snapshot version %d", version)
	}
	if version > snapshotVersion1 {
		settings := d.byte()
		if d.err == nil && settings&^snapshotMonotonic != 0 {
			return nil, fmt.Errorf("unknown snapshot settings %#x", settings)
		}
		m.replaying.policy.monotonic = settings&snapshotMonotonic != 0
		m.replaying.recorded = true
	}
	seen := make(map[string]bool)
	for d.err == nil {
		switch tag := d.byte(); tag {
		case snapshotDomain:
			if err := m.restoreDomain(&d, version, seen); err != nil {
				return nil, err
			}
		case snapshotTrailer:
			floor := d.uvarint()
			m.raiseFenceFloor(floor)
			if m.replaying != nil {
				m.replaying.base = floor
			}
			if serial := d.uvarint(); serial > m.domainSerial.Load() {
				m.domainSerial.Store(serial)
			}
			n := d.items(2)
			skip := make(map[string]uint64, n)
			for range n {
				domain := d.string()
				skip[domain] = max(skip[domain], d.uvarint())
			}
			if end := d.byte(); d.err == nil && (end != snapshotEnd || len(d.b) != 0) {
				return nil, fmt.Errorf("snapshot does not end after its trailer")
			}
			if d.err != nil {
				return nil, d.err
			}
			// A domain written to the snapshot before Forget dropped it is
			// gone: drop it again (its records up to the Forget are skipped).
			for domain, seq := range skip {
				m.dropRestored(domain, seq)
			}
			return skip, nil
		default:
			if d.err == nil {
				return nil, fmt.Errorf("unknown snapshot section %d", tag)
			}
		}
	}
	return nil, d.err
}

// dropRestored drops domain if the snapshot holds it from before the Forget
// journaled at seq.
func (m *Manager) dropRestored(domain string, seq uint64) {
	_, r := m.lockRecord(domain, false)
	if r == nil {
		return
	}
	if r.lastSeq >= seq {
		r.mu.Unlock()
		return
	}
	m.noteForgotten(domain, r.state.issued.fence)
	r.dropped = true
	r.mu.Unlock()
	m.unlink(r)
}

// restoreDomain decodes one domain's state, in the given snapshot version,
// into a new record.
func (m *Manager) restoreDomain(d *decoder, version byte, seen map[string]bool) error {
	domain := d.string()
	if d.err != nil {
		return d.err
	}
	if seen[domain] {
		return fmt.Errorf("domain %q appears twice", domain)
	}
	seen[domain] = true
	sh, r := m.lockRecord(domain, true)
	defer r.mu.Unlock()
	s := &r.state
	r.lastSeq = d.uvarint()
	s.issued.fence = d.uvarint()
	s.paused = d.bool()
	if d.bool() {
		fence := s.issued.fence
		c := change{kind: EventAcquired, offset: d.varint(), token: d.token(), acquiredAt: d.instant(), expiresAt: d.instant(), retries: d.int()}
		c.attempt = c.retries + 1       // version 1 kept the failed attempts alone
		if version > snapshotVersion1 { // later ones, the attempts made too
			c.attempt = d.int()
		}
		if c.attempt > c.retries {
			s.apply(&m.policy, 0, &c)
		} else {
			d.stop(fmt.Errorf("lease on attempt %d after %d failed", c.attempt, c.retries))
		}
		s.issued.fence = fence // checkInvariants, below, checks that it is the lease's
	}
	revoked := d.token()
	var why error
	switch d.byte() {
	case revokedNone:
	case revokedExpired:
		why = ErrLeaseExpired
	case revokedByAdmin:
		why = ErrLeaseRevoked
	default:
		d.stop(fmt.Errorf("bad revoked reason"))
	}
	if !revoked.IsZero() || why != nil {
		c := s.coldPart()
		c.revoked, c.revokedErr = revoked, why
	}
	for range d.items(1) {
		if x := d.varint(); x < 0 || !s.queue().pushBack(x) {
			d.stop(fmt.Errorf("bad backlog offset %d", x))
		}
	}
	var runs []offsetRun
	for range d.items(2) {
		lo, n := d.varint(), d.uvarint()
		if lo < 0 || n > uint64(math.MaxInt64-lo) || (len(runs) > 0 && lo-1 <= runs[len(runs)-1].hi) {
			d.stop(fmt.Errorf("bad processed run at %d", lo))
			break
		}
		runs = append(runs, offsetRun{lo, lo + int64(n)})
	}
	s.processed.setRuns(runs)
	for range d.items(4) {
		off, attempts, at, cause := d.varint(), d.int(), d.instant(), d.string()
		if off < 0 || s.isFailed(off) {
			d.stop(fmt.Errorf("bad failed offset %d", off))
		}
		s.coldPart().failed.add(off, deadLetter{cause: causeFromText(cause), attempts: attempts, at: at})
	}
	minCarried := 3
	if version > snapshotVersion1 {
		minCarried = 4
	}
	for range d.items(minCarried) {
		off := d.varint()
		var a attempt
		if version > snapshotVersion1 {
			a.attempts = d.int()
		}
		a.retries, a.acquiredAt = d.int(), d.instant()
		if version == snapshotVersion1 {
			a.attempts = a.retries // version 1 kept the failed attempts alone
		}
		if a.attempts < a.retries {
			d.stop(fmt.Errorf("offset %d carries %d attempts, %d of them failed", off, a.attempts, a.retries))
		}
		s.carry(off, a)
	}
	if version >= snapshotVersion {
		m.restoreProduced(d, s)
	}
	if d.err != nil {
		return fmt.Errorf("domain %q: %w", domain, d.err)
	}
	p := &m.replaying.policy // the snapshot's rule
	if version == snapshotVersion1 && p.monotonic {
		// Version 1 does not say which rule it was written under, and
		// restores under the Manager's. Under WithMonotonicOffsets,
		// processed is the run [0, hw]: a snapshot written with the option
		// holds it already, and one written without it switches over.
		s.switchRule(true)
	}
	if err := s.checkInvariants(p); err != nil {
		if version == snapshotVersion1 && !p.monotonic && s.processed.numRuns() == 1 && s.processed.last().lo == 0 {
			// One run from 0 is what a snapshot written with the option
			// holds; say so, since the invariant alone does not.
			err = fmt.Errorf("%w (was the journal written WithMonotonicOffsets?)", err)
		}
		return fmt.Errorf("domain %q: %w", domain, err)
	}
	sh.expiry.sync(r) // whatever the options, as replay's apply does
	return nil
}

// restoreProduced decodes what appendProduced wrote into s.
func (m *Manager) restoreProduced(d *decoder, s *domainState) {
	for range d.items(3) {
		off := d.varint()
		var pl payload
		switch d.byte() {
		case payloadInline:
			n := d.uvarint()
			if n > uint64(len(d.b)) {
				d.stop(fmt.Errorf("payload of %d bytes: %w", n, errShort))
				return
			}
			pl.data = append(make([]byte, 0, n), d.b[:n]...)
			d.b = d.b[n:]
		case payloadHeld:
			if pl.seq = d.uvarint(); pl.seq == 0 && d.err == nil {
				d.stop(fmt.Errorf("payload of offset %d in record 0", off))
			}
		default:
			d.stop(fmt.Errorf("bad payload of offset %d", off))
		}
		if _, dup := s.payloadOf(off); dup || d.err != nil {
			d.stop(fmt.Errorf("bad payload of offset %d", off))
			return
		}
		if pl.seq != 0 && m.payloads == nil {
			// Written by a Manager whose journal held its payloads; this
			// one's cannot give them back.
			d.stop(fmt.Errorf("the payload of offset %d is in record %d, and the journal gives none back", off, pl.seq))
			return
		}
		s.keepPayload(off, pl.data)
		s.cold.payloads[off] = pl
	}
	for range d.items(2) {
		off, at := d.varint(), d.instant()
		if at == 0 || s.scheduledAt(off) != 0 {
			d.stop(fmt.Errorf("bad schedule of offset %d", off))
			return
		}
		s.schedule(off, at)
	}
	if at := d.instant(); at != 0 {
		s.coldPart().retryAt = at
	}
	for range d.items(11) {
		key, off, sum, at := d.string(), d.varint(), d.uint64(), d.instant()
		if key == "" || d.err != nil {
			d.stop(errors.New("bad idempotency key"))
			return
		}
		s.keepKey(&m.replaying.policy, key, appendKey{offset: off, sum: sum, at: at})
	}
}
