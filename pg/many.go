package pg

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/worklease/worklease"
)

// RetryMany and ExtendMany end or renew many leases in one round trip: one
// statement calls the schema's function of the single call for each
// lease, in one transaction, taking the domains in the order of their
// names (each domain's leases in the order given), as every call that
// locks more than one domain does.

// manyStatement returns the statement that calls fn for each row of the
// arrays $1 to $n, of the types given, and returns each answer with its
// row's index (from 0), in the order of the calls; the time and the
// policy follow the arrays.
func manyStatement(schema, fn string, types ...string) string {
	cols := make([]string, len(types))
	arrays := make([]string, len(types))
	for i, t := range types {
		cols[i] = fmt.Sprintf("c%d", i+1)
		arrays[i] = fmt.Sprintf("$%d::%s[]", i+1, t)
	}
	answers := "r." + strings.ReplaceAll(answerColumns, ", ", ", r.")
	// OFFSET 0 keeps the sorted rows a subquery of their own, whose order
	// the nested loop over the function calls follows.
	return fmt.Sprintf(`SELECT t.i - 1, %[1]s FROM (
	SELECT * FROM unnest(%[2]s) WITH ORDINALITY AS u(%[3]s, i) ORDER BY u.c1, u.i OFFSET 0
) t CROSS JOIN LATERAL %[4]s.%[5]s(t.%[6]s, $%[7]d, %[8]s) r`,
		answers, strings.Join(arrays, ", "), strings.Join(cols, ", "), schema, fn,
		strings.Join(cols, ", t."), len(types)+1, policyRow(schema, len(types)+2))
}

// callMany runs statement, a manyStatement of n rows, with args, the
// arrays, and returns each row's answer by its index.
func (m *Manager) callMany(ctx context.Context, op, statement string, n int, args ...any) ([]answer, error) {
	return retryDeadlocked(func() ([]answer, error) {
		c, err := m.conn(ctx, op)
		if err != nil {
			return nil, err
		}
		defer c.release()
		rows, err := c.Query(ctx, statement, append(append(args, m.now()), m.policy()...)...)
		if err != nil {
			return nil, c.fail(op, err)
		}
		defer rows.Close()
		out := make([]answer, n)
		for rows.Next() {
			var i int64
			var a answer
			if err := rows.Scan(append([]any{&i}, a.dest()...)...); err != nil {
				return nil, c.fail(op, err)
			}
			if i < 0 || i >= int64(n) {
				return nil, fmt.Errorf("pg: %s: the database answered for item %d of %d", op, i, n)
			}
			out[i] = a
		}
		if err := rows.Err(); err != nil {
			return nil, c.fail(op, err)
		}
		return out, nil
	})
}

// holders is the token columns of a batch of leases, a row each: the
// arrays of the schema functions' p_domain, p_fence, p_serial and p_same,
// and the index of each row's lease in the call's argument.
type holders struct {
	domains         [][]byte
	fences, serials []int64
	same            []bool
	index           []int
}

// add adds the lease of tok on domain, the call's argument at index i.
func (h *holders) add(m *Manager, i int, domain string, tok worklease.Token) {
	h.domains = append(h.domains, []byte(domain))
	h.fences = append(h.fences, int64(tok.Fence()))
	h.serials = append(h.serials, int64(tok.Serial()))
	h.same = append(h.same, tok.Instance() == m.instance)
	h.index = append(h.index, i)
}

// RetryMany is Retry for each failure's lease, in one round trip and one
// transaction, and returns for each Retry's result and nil, or Retry's
// error, in the order of failures. A domain named more than once is
// answered in the order given, so that its later failures find the token
// spent. It returns an error of its own, and no results, if the batch
// failed as a whole: ErrOutcomeUnknown if it may have committed, after
// which a RetryMany made again answers each failure it ended with
// ErrNoLease, or ErrTokenMismatch once the domain is leased again.
func (m *Manager) RetryMany(ctx context.Context, failures []worklease.Failure) ([]worklease.RetryResult, []error, error) {
	const op = "RetryMany"
	if m.closed.Load() {
		return nil, nil, fmt.Errorf("pg: %s: %w", op, worklease.ErrClosed)
	}
	results, errs := make([]worklease.RetryResult, len(failures)), make([]error, len(failures))
	var h holders
	causes := make([]error, len(failures))
	var texts [][]byte
	var delays []time.Duration
	for i := range failures {
		f := &failures[i]
		if err := m.check(op, f.Domain, 0); err != nil {
			errs[i] = err
			continue
		}
		if f.Delay < 0 {
			errs[i] = domainError(op, f.Domain, fmt.Errorf("%w: %v", worklease.ErrInvalidDuration, f.Delay))
			continue
		}
		causes[i] = keepCause(f.Cause)
		h.add(m, i, f.Domain, f.Token)
		text, _ := causeText(causes[i]).([]byte) // nil for none
		texts = append(texts, text)
		delays = append(delays, f.Delay)
	}
	if len(h.domains) == 0 {
		return results, errs, nil
	}
	answers, err := m.callMany(ctx, op, m.sql.retryMany, len(h.domains), h.domains, h.fences, h.serials, h.same, texts, delays)
	if err != nil {
		return nil, nil, err
	}
	for row, i := range h.index {
		a := &answers[row]
		f := &failures[i]
		if err := m.refused(op, f.Domain, a, causes[i], f.Token); err != nil {
			errs[i] = err
			continue
		}
		results[i] = worklease.RetryResult{DeadLettered: a.status == 2, RetryCount: int(a.retryCount)}
	}
	return results, errs, nil
}

// ExtendMany is Extend of each claim's lease by d, in one round trip and
// one transaction, and returns for each the lease's expiry and nil, or
// Extend's error, in the order of claims. It returns an error wrapping
// worklease.ErrInvalidDuration if d is not positive, and an error of its
// own if the batch failed as a whole; either way it returns nothing for
// the claims. ExtendMany changes nothing but expiries, so it may be made
// again after any error.
func (m *Manager) ExtendMany(ctx context.Context, claims []worklease.Claim, d time.Duration) ([]time.Time, []error, error) {
	const op = "ExtendMany"
	if m.closed.Load() {
		return nil, nil, fmt.Errorf("pg: %s: %w", op, worklease.ErrClosed)
	}
	if d <= 0 {
		return nil, nil, fmt.Errorf("pg: %s: %w: %v", op, worklease.ErrInvalidDuration, d)
	}
	expiries, errs := make([]time.Time, len(claims)), make([]error, len(claims))
	var h holders
	for i := range claims {
		if err := m.check(op, claims[i].Domain, 0); err != nil {
			errs[i] = err
			continue
		}
		h.add(m, i, claims[i].Domain, claims[i].Token)
	}
	if len(h.domains) == 0 {
		return expiries, errs, nil
	}
	micros := max(d.Microseconds(), 1)
	ds := slices.Repeat([]time.Duration{time.Duration(micros) * time.Microsecond}, len(h.domains))
	answers, err := m.callMany(ctx, op, m.sql.extendMany, len(h.domains), h.domains, h.fences, h.serials, h.same, ds)
	if err != nil {
		return nil, nil, err
	}
	for row, i := range h.index {
		a := &answers[row]
		if err := m.refused(op, claims[i].Domain, a, nil, claims[i].Token); err != nil {
			errs[i] = err
			continue
		}
		expiries[i] = timeOf(a.expireAt)
	}
	return expiries, errs, nil
}
