package pg

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worklease/worklease"
)

// The listings page by key: domains by their keys (their bytes, but for
// domains longer than keyBytes: see domains.go), leases by expiry and then
// domain, dead letters by domain key and offset, or newest first by time,
// domain key and offset. Each page is one query that reads an index from
// the cursor on (the migration 004_listing.sql adds those the filters and
// the order by time need, and 006_domain_keys.sql puts keys in them). The
// cursors hold domains, whose keys the queries take. A filter no index serves (leased, or several states
// at once) reads up to listBudget domains of its index a page, so that a
// page costs about the same however few domains match; the page may then
// hold fewer domains than asked, with Next set.

// listBudget is how many domains a page of a filter no index serves reads
// at most.
const listBudget = 2000

// The kinds of the cursors, and their version: a cursor is the kind, the
// version, then its fields, in base64 (URL alphabet, no padding).
const (
	cursorVersion     = 1
	cursorDomains     = 'D'
	cursorLeases      = 'L'
	cursorNoExpiry    = 'N' // leases that never expire
	cursorDeadLetters = 'X' // every domain's, by domain
	cursorDomainDead  = 'O' // one domain's
	cursorNewestFirst = 'T'
)

// A cursor is a page's place, written with its kind and read back.
type cursor struct {
	b []byte
}

func newCursor(kind byte) *cursor { return &cursor{b: []byte{kind, cursorVersion}} }

func (c *cursor) int64(v int64) *cursor {
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
	return c
}
func (c *cursor) bytes(v []byte) *cursor {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(v)))
	c.b = append(c.b, v...)
	return c
}
func (c *cursor) String() string { return base64.RawURLEncoding.EncodeToString(c.b) }

// A cursorReader reads a cursor's fields; ok turns false at the first one
// that is not there.
type cursorReader struct {
	b  []byte
	ok bool
}

// readCursor starts reading s, a cursor of kind, for call op.
func readCursor(op string, kind byte, s string) (*cursorReader, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	switch {
	case err != nil || len(b) < 2:
		return nil, worklease.CursorError(op, "not a cursor")
	case b[0] != kind:
		return nil, worklease.CursorError(op, "a cursor of another call or query")
	case b[1] != cursorVersion:
		return nil, worklease.CursorError(op, "a cursor of another version")
	}
	return &cursorReader{b: b[2:], ok: true}, nil
}

func (r *cursorReader) int64() int64 {
	if !r.ok || len(r.b) < 8 {
		r.ok = false
		return 0
	}
	v := int64(binary.BigEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

func (r *cursorReader) bytes() []byte {
	if !r.ok || len(r.b) < 4 {
		r.ok = false
		return nil
	}
	n := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	if uint32(len(r.b)) < n || n > worklease.MaxDomainLen {
		r.ok = false
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// end returns the error of a cursor that ran short or has bytes left.
func (r *cursorReader) end(op string) error {
	if !r.ok || len(r.b) != 0 {
		return worklease.CursorError(op, "cut short or too long")
	}
	return nil
}

// summaryColumns are the columns of a domain's summary, as scanSummary
// reads them, from the domains' row x.
const summaryColumns = "x.domain, x.lease_off, x.fence, x.serial, x.lease_retries, x.lease_acquired_at, x.lease_expires_at, " +
	"x.paused, x.queued, x.failed"

// stateFilter returns the SQL condition on the domains' row x of the
// domains in every state of s.
func stateFilter(s worklease.DomainState) string {
	conds := []string{"true"}
	if s&worklease.DomainLeased != 0 {
		conds = append(conds, "x.lease_off IS NOT NULL")
	}
	if s&(worklease.DomainPaused|worklease.DomainParked) != 0 {
		conds = append(conds, "x.paused")
	}
	if s&(worklease.DomainDeadLettered|worklease.DomainParked) != 0 {
		conds = append(conds, "x.failed > 0")
	}
	if s&worklease.DomainBacklogged != 0 {
		conds = append(conds, "x.queued > 0")
	}
	return strings.Join(conds, " AND ")
}

// prefixEnd returns the least key above every key that starts with
// prefix, or nil if there is none (prefix is empty or all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for len(end) > 0 && end[len(end)-1] == 0xff {
		end = end[:len(end)-1]
	}
	if len(end) == 0 {
		return nil
	}
	end[len(end)-1]++
	return end
}

// domainsQuery returns the statement and arguments of a page of ListDomains
// with limit, after the domain after (nil: from the start), and the number
// of rows of its index the page reads at most.
//
// The page reads its driving index from the cursor on, as far as the
// prefix goes: the domains' paused index for paused or parked, their dead
// letters' index for dead-lettered, the backlog's keys (skipping from one
// domain to the next) for backlogged, and the domains' keys otherwise. A
// domain's key starts with the prefix if the domain does, as far as the
// key holds the domain's bytes (keyBytes); a longer prefix is checked on
// the domains. If the filter asks for nothing the index does not already
// say, it reads limit+1 rows, to know whether more follow; otherwise up to
// listBudget.
func (m *Manager) domainsQuery(q worklease.DomainQuery, after []byte, limit int) (string, []any, int) {
	prefix := []byte(q.Prefix)
	if len(prefix) > keyBytes {
		prefix = prefix[:keyBytes]
	}
	lower, op := prefix, ">="
	if after != nil && bytes.Compare(key(after), prefix) >= 0 {
		lower, op = key(after), ">"
	}
	args := []any{lower}
	bound := func(col string) string {
		cond := fmt.Sprintf("%s %s $1", col, op)
		if end := prefixEnd(prefix); end != nil {
			args = append(args, end)
			cond += fmt.Sprintf(" AND %s < $%d", col, len(args))
		}
		return cond
	}
	var driver string
	var implied worklease.DomainState // what the driver's rows are known to be
	switch s := q.State; {
	case s&worklease.DomainParked != 0:
		driver = fmt.Sprintf("SELECT %s FROM %s.domains x WHERE x.paused AND %s ORDER BY x.key", summaryColumns, m.schema, bound("x.key"))
		implied = worklease.DomainPaused
	case s&worklease.DomainPaused != 0:
		driver = fmt.Sprintf("SELECT %s FROM %s.domains x WHERE x.paused AND %s ORDER BY x.key", summaryColumns, m.schema, bound("x.key"))
		implied = worklease.DomainPaused
	case s&worklease.DomainDeadLettered != 0:
		driver = fmt.Sprintf("SELECT %s FROM %s.domains x WHERE x.failed > 0 AND %s ORDER BY x.key", summaryColumns, m.schema, bound("x.key"))
		implied = worklease.DomainDeadLettered
	case s&worklease.DomainBacklogged != 0:
		// A loose scan of the backlog's keys: one probe of its index for
		// each domain, in order.
		first := bound("b.key")
		next := "b.key > r.key"
		if end := prefixEnd(prefix); end != nil {
			next += fmt.Sprintf(" AND b.key < $%d", len(args))
		}
		driver = fmt.Sprintf(`WITH RECURSIVE r(key) AS (
				(SELECT b.key FROM %[1]s.backlog b WHERE %[2]s ORDER BY b.key LIMIT 1)
				UNION ALL
				SELECT (SELECT b.key FROM %[1]s.backlog b WHERE %[3]s ORDER BY b.key LIMIT 1) FROM r WHERE r.key IS NOT NULL
			), k AS (SELECT r.key FROM r WHERE r.key IS NOT NULL LIMIT $%[4]d)
			SELECT %[5]s FROM k JOIN %[1]s.domains x ON x.key = k.key ORDER BY x.key`,
			m.schema, first, next, len(args)+1, summaryColumns)
		// A domain's backlog rows and its queued count change together,
		// so the statement's snapshot agrees on them.
		implied = worklease.DomainBacklogged
	default:
		driver = fmt.Sprintf("SELECT %s FROM %s.domains x WHERE NOT x.forgotten AND %s ORDER BY x.key", summaryColumns, m.schema, bound("x.key"))
	}
	filter := stateFilter(q.State)
	read := listBudget
	if len(q.Prefix) > keyBytes {
		args = append(args, []byte(q.Prefix))
		filter += fmt.Sprintf(" AND substr(x.domain, 1, %d) = $%d", len(q.Prefix), len(args))
	} else if q.State&^implied == 0 {
		read = limit + 1
	}
	budget := len(args) + 1
	args = append(args, int64(read))
	if q.State&worklease.DomainBacklogged == 0 || q.State&(worklease.DomainPaused|worklease.DomainParked|worklease.DomainDeadLettered) != 0 {
		driver += fmt.Sprintf(" LIMIT $%d", budget)
	}
	args = append(args, int64(limit+1))
	statement := fmt.Sprintf(`WITH s AS MATERIALIZED (%[1]s),
		p AS (SELECT * FROM s x WHERE %[2]s ORDER BY %[4]s._key(x.domain) LIMIT $%[3]d)
		SELECT t.last, t.read, x.*,
			CASE WHEN x.queued > 0 THEN (SELECT b.off FROM %[4]s.backlog b WHERE %[5]s ORDER BY b.pos LIMIT 1) END
		FROM (SELECT (SELECT s.domain FROM s ORDER BY %[4]s._key(s.domain) DESC LIMIT 1) AS last, (SELECT count(*) FROM s) AS read) t
		LEFT JOIN p x ON true
		ORDER BY %[4]s._key(x.domain)`, driver, filter, len(args), m.schema, domainIs(m.schema, "b", "x.domain"))
	return statement, args, read
}

// ListDomains returns a page of the domains q asks for, ordered by their
// bytes, in one query (see the listing's notes above).
func (m *Manager) ListDomains(ctx context.Context, q worklease.DomainQuery) (worklease.DomainPage, error) {
	const op = "ListDomains"
	if m.closed.Load() {
		return worklease.DomainPage{}, fmt.Errorf("pg: %s: %w", op, worklease.ErrClosed)
	}
	limit, err := worklease.PageLimit(op, q.Limit)
	if err != nil {
		return worklease.DomainPage{}, err
	}
	var after []byte
	if q.After != "" {
		r, err := readCursor(op, cursorDomains, q.After)
		if err != nil {
			return worklease.DomainPage{}, err
		}
		after = r.bytes()
		if err := r.end(op); err != nil {
			return worklease.DomainPage{}, err
		}
	}
	statement, args, budget := m.domainsQuery(q, after, limit)
	rows, err := m.pool.Query(ctx, statement, args...)
	if err != nil {
		return worklease.DomainPage{}, dbError(op, err)
	}
	defer rows.Close()
	var page worklease.DomainPage
	var last []byte
	var read int64
	for rows.Next() {
		var domain []byte
		var off, fence, serial, head *int64
		var retries *int32
		var acquired, expires *time.Time
		var paused *bool
		var queued, failed *int32
		if err := rows.Scan(&last, &read, &domain, &off, &fence, &serial, &retries, &acquired, &expires, &paused, &queued, &failed, &head); err != nil {
			return worklease.DomainPage{}, dbError(op, err)
		}
		if domain == nil {
			continue // the row of a page that matched nothing
		}
		d := worklease.DomainSummary{Domain: string(domain), Paused: *paused, Queued: int64(*queued), DeadLetters: int64(*failed)}
		if off != nil {
			d.Leased = true
			d.Lease = worklease.LeaseInfo{Domain: d.Domain, Offset: *off, Token: m.token(*fence, *serial), RetryCount: int(*retries),
				AcquiredAt: timeOf(acquired), ExpiresAt: timeOf(expires)}
		}
		if head != nil {
			d.Head = *head
		}
		page.Domains = append(page.Domains, d)
	}
	if err := rows.Err(); err != nil {
		return worklease.DomainPage{}, dbError(op, err)
	}
	switch {
	case len(page.Domains) > limit:
		page.Domains = page.Domains[:limit]
		page.Next = newCursor(cursorDomains).bytes([]byte(page.Domains[limit-1].Domain)).String()
	case read >= int64(budget) && last != nil:
		page.Next = newCursor(cursorDomains).bytes(last).String()
	}
	return page, nil
}

// leaseColumns are the columns of a lease, as scanLease reads them.
const leaseColumns = "x.domain, x.lease_off, x.fence, x.serial, x.lease_retries, x.lease_acquired_at, x.lease_expires_at"

// scanLease reads a row of leaseColumns.
func (m *Manager) scanLease(rows pgx.Rows) (worklease.LeaseInfo, error) {
	var domain []byte
	var l worklease.LeaseInfo
	var fence, serial int64
	var retries int32
	var acquired, expires *time.Time
	if err := rows.Scan(&domain, &l.Offset, &fence, &serial, &retries, &acquired, &expires); err != nil {
		return l, err
	}
	l.Domain, l.Token, l.RetryCount = string(domain), m.token(fence, serial), int(retries)
	l.AcquiredAt, l.ExpiresAt = timeOf(acquired), timeOf(expires)
	return l, nil
}

// ListLeases returns a page of the leases in flight, the soonest to expire
// first, in one query: those with an expiry through the index of expiries,
// then those without (leases granted with no TTL) by domain, reading up
// to listBudget domains a page.
func (m *Manager) ListLeases(ctx context.Context, q worklease.LeaseQuery) (worklease.LeasePage, error) {
	const op = "ListLeases"
	if m.closed.Load() {
		return worklease.LeasePage{}, fmt.Errorf("pg: %s: %w", op, worklease.ErrClosed)
	}
	limit, err := worklease.PageLimit(op, q.Limit)
	if err != nil {
		return worklease.LeasePage{}, err
	}
	expiring := true
	at, after := time.Time{}, []byte(nil)
	if q.After != "" {
		r, err := readCursor(op, cursorLeases, q.After)
		if err != nil {
			if r, err = readCursor(op, cursorNoExpiry, q.After); err != nil {
				return worklease.LeasePage{}, err
			}
			expiring = false
		}
		if expiring {
			at = time.UnixMicro(r.int64())
		}
		after = r.bytes()
		if err := r.end(op); err != nil {
			return worklease.LeasePage{}, err
		}
	}
	if !expiring {
		// The leases without an expiry go by key, from after's on: from
		// the empty key, before every domain, if after is nil (NULL would
		// match none).
		after = append([]byte{}, key(after)...)
	}
	var page worklease.LeasePage
	if expiring {
		statement, args := m.expiringQuery(at, after, limit)
		leases, err := m.queryLeases(ctx, op, statement, args...)
		if err != nil {
			return worklease.LeasePage{}, err
		}
		if len(leases) > limit {
			l := leases[limit-1]
			page.Leases = leases[:limit]
			page.Next = newCursor(cursorLeases).int64(l.ExpiresAt.UnixMicro()).bytes([]byte(l.Domain)).String()
			return page, nil
		}
		page.Leases = leases
		// The leases without an expiry follow, from the next page on.
		page.Next = newCursor(cursorNoExpiry).bytes(nil).String()
		return page, nil
	}
	statement := fmt.Sprintf(`WITH s AS MATERIALIZED (SELECT x.* FROM %[1]s.domains x WHERE x.key > $1 ORDER BY x.key LIMIT %[2]d)
		SELECT t.last, %[3]s FROM (SELECT (SELECT s.domain FROM s ORDER BY s.key DESC LIMIT 1) AS last) t
		LEFT JOIN LATERAL (SELECT * FROM s x WHERE x.lease_off IS NOT NULL AND x.lease_expires_at IS NULL ORDER BY x.key LIMIT $2) x ON true
		ORDER BY x.key`, m.schema, listBudget, leaseColumns)
	rows, err := m.pool.Query(ctx, statement, after, limit+1)
	if err != nil {
		return worklease.LeasePage{}, dbError(op, err)
	}
	defer rows.Close()
	var last []byte
	for rows.Next() {
		var domain []byte
		var off, fence, serial *int64
		var retries *int32
		var acquired, expires *time.Time
		if err := rows.Scan(&last, &domain, &off, &fence, &serial, &retries, &acquired, &expires); err != nil {
			return worklease.LeasePage{}, dbError(op, err)
		}
		if domain == nil {
			continue
		}
		page.Leases = append(page.Leases, worklease.LeaseInfo{Domain: string(domain), Offset: *off, Token: m.token(*fence, *serial),
			RetryCount: int(*retries), AcquiredAt: timeOf(acquired), ExpiresAt: timeOf(expires)})
	}
	if err := rows.Err(); err != nil {
		return worklease.LeasePage{}, dbError(op, err)
	}
	switch {
	case len(page.Leases) > limit:
		page.Leases = page.Leases[:limit]
		page.Next = newCursor(cursorNoExpiry).bytes([]byte(page.Leases[limit-1].Domain)).String()
	case last != nil && len(page.Leases) < limit:
		// The page read up to its budget, or to the end: another page
		// tells, which reads nothing once past the last domain.
		page.Next = newCursor(cursorNoExpiry).bytes(last).String()
	}
	return page, nil
}

// expiringQuery returns the statement and arguments of a page of the
// leases with an expiry, after the lease of domain after expiring at at
// (after nil: from the first).
func (m *Manager) expiringQuery(at time.Time, after []byte, limit int) (string, []any) {
	if after == nil {
		return fmt.Sprintf("SELECT %s FROM %s.domains x WHERE x.lease_expires_at IS NOT NULL ORDER BY x.lease_expires_at, x.domain LIMIT $1",
			leaseColumns, m.schema), []any{int64(limit + 1)}
	}
	return fmt.Sprintf("SELECT %s FROM %s.domains x WHERE x.lease_expires_at IS NOT NULL AND (x.lease_expires_at, x.domain) > ($2, $3) "+
		"ORDER BY x.lease_expires_at, x.domain LIMIT $1", leaseColumns, m.schema), []any{int64(limit + 1), at, after}
}

// queryLeases runs a statement of leaseColumns.
func (m *Manager) queryLeases(ctx context.Context, op, statement string, args ...any) ([]worklease.LeaseInfo, error) {
	rows, err := m.pool.Query(ctx, statement, args...)
	if err != nil {
		return nil, dbError(op, err)
	}
	defer rows.Close()
	var out []worklease.LeaseInfo
	for rows.Next() {
		l, err := m.scanLease(rows)
		if err != nil {
			return nil, dbError(op, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(op, err)
	}
	return out, nil
}

// deadColumns are the columns of a dead letter, as scanDeadLetter reads
// them, from the dead letters' row d and the payloads' p, whose payload it
// reads only if the argument numbered payload is true.
func deadColumns(payload int) string {
	return fmt.Sprintf("d.domain, d.off, d.why, d.cause, d.attempts, d.at, CASE WHEN $%d::bool THEN p.payload END", payload)
}

// scanDeadLetter reads a row of deadColumns.
func scanDeadLetter(rows pgx.Rows) (worklease.DeadLetter, error) {
	var domain, cause, payload []byte
	var why int16
	var attempts int32
	var dl worklease.DeadLetter
	if err := rows.Scan(&domain, &dl.Offset, &why, &cause, &attempts, &dl.At, &payload); err != nil {
		return dl, err
	}
	dl.Domain, dl.Attempts, dl.Payload = string(domain), int(attempts), payload
	switch {
	case why == 1:
		dl.Cause = worklease.ErrLeaseExpired
	case len(cause) > 0:
		dl.Cause = errors.New(string(cause))
	}
	return dl, nil
}

// ListDeadLetters returns a page of the dead letters q asks for, in one
// query through the dead letters' key (domain, offset), or their index by
// time for newest first.
func (m *Manager) ListDeadLetters(ctx context.Context, q worklease.DeadLetterQuery) (worklease.DeadLetterPage, error) {
	const op = "ListDeadLetters"
	if m.closed.Load() {
		return worklease.DeadLetterPage{}, fmt.Errorf("pg: %s: %w", op, worklease.ErrClosed)
	}
	limit, err := worklease.PageLimit(op, q.Limit)
	if err != nil {
		return worklease.DeadLetterPage{}, err
	}
	statement, args, kind, err := m.deadLettersQuery(q, limit)
	if err != nil {
		return worklease.DeadLetterPage{}, err
	}
	rows, err := m.pool.Query(ctx, statement, args...)
	if err != nil {
		return worklease.DeadLetterPage{}, dbError(op, err)
	}
	defer rows.Close()
	var page worklease.DeadLetterPage
	for rows.Next() {
		dl, err := scanDeadLetter(rows)
		if err != nil {
			return worklease.DeadLetterPage{}, dbError(op, err)
		}
		page.DeadLetters = append(page.DeadLetters, dl)
	}
	if err := rows.Err(); err != nil {
		return worklease.DeadLetterPage{}, dbError(op, err)
	}
	if len(page.DeadLetters) > limit {
		page.DeadLetters = page.DeadLetters[:limit]
		dl := page.DeadLetters[limit-1]
		c := newCursor(kind)
		switch kind {
		case cursorDomainDead:
			c.int64(dl.Offset)
		case cursorDeadLetters:
			c.bytes([]byte(dl.Domain)).int64(dl.Offset)
		case cursorNewestFirst:
			c.int64(dl.At.UnixMicro()).bytes([]byte(dl.Domain)).int64(dl.Offset)
		}
		page.Next = c.String()
	}
	return page, nil
}

// deadLettersQuery returns the statement and arguments of a page of
// ListDeadLetters with limit, and the kind of its cursor.
func (m *Manager) deadLettersQuery(q worklease.DeadLetterQuery, limit int) (string, []any, byte, error) {
	const op = "ListDeadLetters"
	from := fmt.Sprintf("%s.dead_letters d LEFT JOIN %s.payloads p ON %s AND p.off = d.off", m.schema, m.schema, sameDomain("p", "d"))
	args := []any{int64(limit + 1), q.Payloads}
	var where, order string
	var kind byte
	switch {
	case q.Domain != "":
		if err := m.check(op, q.Domain, 0); err != nil {
			return "", nil, 0, err
		}
		kind, order = cursorDomainDead, "d.off"
		where = domainIs(m.schema, "d", "$3")
		args = append(args, []byte(q.Domain))
		if q.After != "" {
			r, err := readCursor(op, kind, q.After)
			if err != nil {
				return "", nil, 0, err
			}
			off := r.int64()
			if err := r.end(op); err != nil {
				return "", nil, 0, err
			}
			where += " AND d.off > $4"
			args = append(args, off)
		}
	case q.Order == worklease.DeadLettersByDomain:
		kind, order, where = cursorDeadLetters, "d.key, d.off", "true"
		if q.After != "" {
			r, err := readCursor(op, kind, q.After)
			if err != nil {
				return "", nil, 0, err
			}
			domain, off := r.bytes(), r.int64()
			if err := r.end(op); err != nil {
				return "", nil, 0, err
			}
			where = "(d.key, d.off) > ($3, $4)"
			args = append(args, key(domain), off)
		}
	case q.Order == worklease.DeadLettersNewestFirst:
		kind, order, where = cursorNewestFirst, "d.at DESC, d.key DESC, d.off DESC", "true"
		if q.After != "" {
			r, err := readCursor(op, kind, q.After)
			if err != nil {
				return "", nil, 0, err
			}
			at, domain, off := time.UnixMicro(r.int64()), r.bytes(), r.int64()
			if err := r.end(op); err != nil {
				return "", nil, 0, err
			}
			where = "(d.at, d.key, d.off) < ($3, $4, $5)"
			args = append(args, at, key(domain), off)
		}
	default:
		return "", nil, 0, &worklease.QueryError{Op: op, Err: worklease.ErrInvalidCursor, Detail: "no such order: " + q.Order.String()}
	}
	statement := fmt.Sprintf("SELECT %s FROM %s WHERE %s ORDER BY %s LIMIT $1", deadColumns(2), from, where, order)
	return statement, args, kind, nil
}

// InspectDeadLetter returns offset's dead letter in domain, with its
// payload if it was enqueued with one, or an error matching
// worklease.ErrNotDeadLettered if the offset is not failed.
func (m *Manager) InspectDeadLetter(ctx context.Context, domain string, offset int64) (worklease.DeadLetter, error) {
	const op = "InspectDeadLetter"
	if err := m.check(op, domain, offset); err != nil {
		return worklease.DeadLetter{}, err
	}
	statement := fmt.Sprintf("SELECT %s FROM %s.dead_letters d LEFT JOIN %s.payloads p ON %s AND p.off = d.off "+
		"WHERE %s AND d.off = $3", deadColumns(1), m.schema, m.schema, sameDomain("p", "d"), domainIs(m.schema, "d", "$2"))
	rows, err := m.pool.Query(ctx, statement, true, []byte(domain), offset)
	if err != nil {
		return worklease.DeadLetter{}, dbError(op, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return worklease.DeadLetter{}, dbError(op, err)
		}
		return worklease.DeadLetter{}, domainError(op, domain, worklease.ErrNotDeadLettered)
	}
	dl, err := scanDeadLetter(rows)
	if err != nil {
		return worklease.DeadLetter{}, dbError(op, err)
	}
	return dl, nil
}

// Totals returns how much the database holds, in one query that reads
// every domain's row.
func (m *Manager) Totals(ctx context.Context) (worklease.Totals, error) {
	const op = "Totals"
	if m.closed.Load() {
		return worklease.Totals{}, fmt.Errorf("pg: %s: %w", op, worklease.ErrClosed)
	}
	var t worklease.Totals
	err := m.pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE NOT forgotten), count(lease_off),
		count(*) FILTER (WHERE paused), coalesce(sum(queued), 0), coalesce(sum(failed), 0) FROM %s.domains`, m.schema)).
		Scan(&t.Domains, &t.Leased, &t.Paused, &t.Queued, &t.DeadLetters)
	if err != nil {
		return worklease.Totals{}, dbError(op, err)
	}
	return t, nil
}
