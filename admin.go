package worklease

import "time"

// DomainInfo is a copy of one domain's state, as Inspect reports it.
type DomainInfo struct {
	// Leased reports whether an offset is in flight; Lease describes it then.
	Leased bool
	Lease  LeaseInfo
	// Backlog lists the queued offsets, the next one to be granted first.
	Backlog []int64
	// Processed and Failed count the domain's terminal offsets.
	Processed int64
	Failed    int64
}

// LeaseInfo describes a lease in flight.
type LeaseInfo struct {
	Offset     int64
	Token      Token
	AcquiredAt time.Time // when the offset was first granted
	RetryCount int       // retries Fail has scheduled for the offset
}

// Inspect returns a copy of domain's state. A domain the Manager has never
// seen is reported idle and empty. Inspect takes the domain's lock only long
// enough to copy it.
func (m *Manager) Inspect(domain string) (DomainInfo, error) {
	if m.closed.Load() {
		return DomainInfo{}, ErrClosed
	}
	r := m.lookup(domain)
	if r == nil {
		return DomainInfo{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.state
	info := DomainInfo{
		Leased:    s.leased,
		Processed: s.processed.len(),
		Failed:    s.failed.len(),
	}
	if s.leased {
		l := s.lease
		info.Lease = LeaseInfo{Offset: l.offset, Token: l.token, AcquiredAt: l.acquiredAt, RetryCount: l.retries}
	}
	if n := s.backlog.len(); n > 0 {
		info.Backlog = s.backlog.appendTo(make([]int64, 0, n))
	}
	return info, nil
}
