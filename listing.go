package worklease

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// The listing calls page through what a backend holds: ListDomains,
// ListLeases and ListDeadLetters each return one page and a cursor to the
// next, so that an operator's view of a million domains never holds a
// million of anything. They change nothing, and unlike Inspect they do not
// revoke expired leases: a lease past its expiry is listed, with ExpiresAt
// in the past, until something revokes it.
//
// Paging is by key, never by position: a cursor names the last item a page
// covered, and the next page starts after it. So while the backend changes
// between pages, an item that is there and matches the query for the whole
// listing is listed exactly once, and an item that comes, goes or changes
// meanwhile may be listed or not (a lease renewed between pages moves to a
// later place in the order, where it may be met again).

// DefaultPageLimit is the number of items a page holds at most when a
// query's Limit is zero.
const DefaultPageLimit = 100

// MaxPageLimit is the largest Limit a query may ask for.
const MaxPageLimit = 1000

// Errors returned by ListDomains, ListLeases and ListDeadLetters. Each is
// returned as a *QueryError that matches it under errors.Is.
var (
	// ErrInvalidCursor is returned for a cursor that is not the Next of a
	// page of the same call on the same backend: one that was changed,
	// cut, or comes from another call, another backend, or a Manager that
	// has since restarted.
	ErrInvalidCursor = errors.New("worklease: invalid page cursor")

	// ErrInvalidLimit is returned for a negative Limit, or one above
	// MaxPageLimit.
	ErrInvalidLimit = errors.New("worklease: invalid page limit")
)

// A QueryError reports a listing call's query that the backend refused.
// It matches its Err (ErrInvalidCursor or ErrInvalidLimit) under
// errors.Is.
type QueryError struct {
	Op     string // the call, such as "ListDomains"
	Err    error  // ErrInvalidCursor or ErrInvalidLimit
	Detail string // what is wrong with it
}

func (e *QueryError) Error() string { return fmt.Sprintf("%v (%s: %s)", e.Err, e.Op, e.Detail) }

// Unwrap returns e.Err.
func (e *QueryError) Unwrap() error { return e.Err }

// CursorError returns the error of call op for a cursor that is not valid,
// for backends to return.
func CursorError(op, detail string) error {
	return &QueryError{Op: op, Err: ErrInvalidCursor, Detail: detail}
}

// PageLimit returns the number of items a page of call op holds at most
// for a query's limit: DefaultPageLimit for zero, the limit itself up to
// MaxPageLimit, and an error matching ErrInvalidLimit for anything else.
// Backends use it to read their queries alike.
func PageLimit(op string, limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageLimit, nil
	case limit < 0 || limit > MaxPageLimit:
		return 0, &QueryError{Op: op, Err: ErrInvalidLimit, Detail: fmt.Sprintf("%d is not between 0 and %d", limit, MaxPageLimit)}
	}
	return limit, nil
}

// DomainState is a set of states a domain may be in, for ListDomains to
// filter by. The zero DomainState is the empty set: every domain has it.
type DomainState uint8

// The states ListDomains filters by. A domain may be in several at once.
const (
	// DomainLeased: an offset is in flight.
	DomainLeased DomainState = 1 << iota
	// DomainPaused: the domain grants nothing until Resume, whether an
	// operator paused it or a dead letter parked it.
	DomainPaused
	// DomainParked: paused with dead letters, as WithParkOnDeadLetter
	// leaves a domain. A backend cannot tell Pause from parking, so a
	// domain paused by an operator that has dead letters is parked too.
	DomainParked
	// DomainDeadLettered: the domain has failed offsets.
	DomainDeadLettered
	// DomainBacklogged: offsets are queued.
	DomainBacklogged
)

// domainStateNames are the states' names, by bit, as String writes them
// and ParseDomainState reads them.
var domainStateNames = [...]string{"leased", "paused", "parked", "dead-lettered", "backlogged"}

// DomainStates returns every single state, in order.
func DomainStates() []DomainState {
	return []DomainState{DomainLeased, DomainPaused, DomainParked, DomainDeadLettered, DomainBacklogged}
}

// String returns the names of the states in s, joined by "|", or "any" for
// the empty set.
func (s DomainState) String() string {
	if s == 0 {
		return "any"
	}
	var names []string
	for i, name := range domainStateNames {
		if s&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if rest := s &^ (1<<len(domainStateNames) - 1); rest != 0 {
		names = append(names, fmt.Sprintf("DomainState(%#x)", uint8(rest)))
	}
	return strings.Join(names, "|")
}

// ParseDomainState returns the set String names: state names joined by
// "|" or ",", or "any" or "" for the empty set.
func ParseDomainState(text string) (DomainState, error) {
	if text == "" || text == "any" {
		return 0, nil
	}
	var s DomainState
	for name := range strings.FieldsFuncSeq(text, func(r rune) bool { return r == '|' || r == ',' }) {
		found := false
		for i, n := range domainStateNames {
			if name == n {
				s |= 1 << i
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("worklease: unknown domain state %q (want one of %s)", name, strings.Join(domainStateNames[:], ", "))
		}
	}
	return s, nil
}

// DomainQuery asks ListDomains for a page of domains.
type DomainQuery struct {
	// Prefix keeps the domains whose key starts with it; "" keeps all.
	Prefix string
	// State keeps the domains in every state of the set; zero keeps all.
	State DomainState
	// After is the Next of the previous page; "" starts at the beginning.
	After string
	// Limit is the most domains the page holds: zero means
	// DefaultPageLimit, and it may not exceed MaxPageLimit.
	Limit int
}

// A DomainPage is a page of domains.
type DomainPage struct {
	Domains []DomainSummary
	// Next is the cursor of the next page, "" when the listing is done. A
	// page may hold fewer domains than the query's Limit, even none, while
	// Next is set: a backend stops a page once it has looked at a bounded
	// number of domains that did not match, so that every page costs
	// about the same. List until Next is "".
	Next string
}

// DomainSummary is a domain as a listing shows it.
type DomainSummary struct {
	Domain string
	// Leased reports whether an offset is in flight; Lease describes it
	// then.
	Leased bool
	Lease  LeaseInfo
	Paused bool // grants nothing until Resume (paused, or parked)
	// Queued is how many offsets the backlog holds; Head is the one it
	// grants next when Queued is not zero.
	Queued int64
	Head   int64
	// DeadLetters is how many of its offsets are failed.
	DeadLetters int64
}

// State returns the states d is in.
func (d DomainSummary) State() DomainState {
	var s DomainState
	if d.Leased {
		s |= DomainLeased
	}
	if d.Paused {
		s |= DomainPaused
		if d.DeadLetters > 0 {
			s |= DomainParked
		}
	}
	if d.DeadLetters > 0 {
		s |= DomainDeadLettered
	}
	if d.Queued > 0 {
		s |= DomainBacklogged
	}
	return s
}

// LeaseQuery asks ListLeases for a page of leases in flight.
type LeaseQuery struct {
	// After is the Next of the previous page; "" starts at the beginning.
	After string
	// Limit is as DomainQuery's.
	Limit int
}

// A LeasePage is a page of leases in flight, the soonest to expire first
// and those that never expire last.
type LeasePage struct {
	Leases []LeaseInfo
	Next   string // as DomainPage's
}

// DeadLetterOrder is the order ListDeadLetters lists dead letters in.
type DeadLetterOrder uint8

const (
	// DeadLettersByDomain lists them domain by domain, in the order of
	// ListDomains, and by offset within a domain. It is the default.
	DeadLettersByDomain DeadLetterOrder = iota
	// DeadLettersNewestFirst lists the latest failures first.
	DeadLettersNewestFirst
)

// String returns "by-domain" or "newest-first".
func (o DeadLetterOrder) String() string {
	switch o {
	case DeadLettersByDomain:
		return "by-domain"
	case DeadLettersNewestFirst:
		return "newest-first"
	}
	return fmt.Sprintf("DeadLetterOrder(%d)", uint8(o))
}

// DeadLetterQuery asks ListDeadLetters for a page of dead letters.
type DeadLetterQuery struct {
	// Domain keeps only that domain's dead letters, by offset; "" keeps
	// every domain's, in Order.
	Domain string
	// Order is the order of every domain's dead letters; a single
	// domain's are always by offset.
	Order DeadLetterOrder
	// Payloads asks for each dead letter's Payload, where the backend
	// keeps payloads.
	Payloads bool
	// After is the Next of the previous page; "" starts at the beginning.
	After string
	// Limit is as DomainQuery's.
	Limit int
}

// A DeadLetterPage is a page of dead letters.
type DeadLetterPage struct {
	DeadLetters []DeadLetter
	Next        string // as DomainPage's
}

// Totals are how much a backend holds at one moment: its domains, the
// leases in flight, the offsets queued and failed. Counting them visits
// every domain, so its cost grows with their number.
type Totals struct {
	Domains     int64 // domains the backend knows
	Leased      int64 // leases in flight
	Paused      int64 // domains paused or parked
	Queued      int64 // offsets queued, in every backlog
	DeadLetters int64 // failed offsets
}

// A cursorWriter writes a Manager's cursor: a kind byte, a tag of the
// Manager that issued it, then the kind's fields, all in base64 (URL
// alphabet, no padding), so that a cursor goes into a URL as it is.
type cursorWriter struct{ b []byte }

func (w *cursorWriter) u8(v uint8) { w.b = append(w.b, v) }
func (w *cursorWriter) u32(v uint32) {
	w.b = append(w.b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
func (w *cursorWriter) u64(v uint64) {
	w.u32(uint32(v >> 32))
	w.u32(uint32(v))
}
func (w *cursorWriter) rest(s string) { w.b = append(w.b, s...) }
func (w *cursorWriter) String() string {
	return base64.RawURLEncoding.EncodeToString(w.b)
}

// A cursorReader reads what a cursorWriter wrote; ok turns false at the
// first field that is not there.
type cursorReader struct {
	b  []byte
	ok bool
}

func newCursorReader(s string) cursorReader {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return cursorReader{b: b, ok: err == nil}
}

func (r *cursorReader) take(n int) []byte {
	if !r.ok || len(r.b) < n {
		r.ok = false
		return make([]byte, n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}
func (r *cursorReader) u8() uint8 { return r.take(1)[0] }
func (r *cursorReader) u32() uint32 {
	b := r.take(4)
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
func (r *cursorReader) u64() uint64 { return uint64(r.u32())<<32 | uint64(r.u32()) }
func (r *cursorReader) rest() string {
	s := string(r.b)
	r.b = nil
	return s
}
