package worklease

import (
	"context"
	"time"
)

// Backend is the lease contract as every implementation offers it: the
// in-memory Manager (through Manager.Backend) and backends that keep their
// state elsewhere, such as a database shared by many processes. Each call
// takes a context first; a backend that does I/O gives up when it is done
// and returns its error, having changed nothing. A call otherwise behaves as
// the Manager's method of the same name documents, with the same results
// and errors, so code written against Backend runs on any of them, and the
// conformance suite in the leasetest package checks that it does.
//
// Tokens a Backend grants are its own: NewToken builds them from a fence,
// the domain's serial and an instance that is unique across the backend's
// processes and restarts.
type Backend interface {
	TryAcquire(ctx context.Context, domain string, offset int64) (AcquireResult, error)
	Succeed(ctx context.Context, domain string, tok Token) (SucceedResult, error)
	SucceedNext(ctx context.Context, domain string, tok Token) (SucceedResult, error)
	Fail(ctx context.Context, domain string, tok Token, cause error) (FailResult, error)
	FailNext(ctx context.Context, domain string, tok Token, cause error) (FailResult, error)
	Extend(ctx context.Context, domain string, tok Token, d time.Duration) (time.Time, error)

	Inspect(ctx context.Context, domain string) (DomainInfo, error)
	Leases(ctx context.Context) ([]LeaseInfo, error)
	Domains(ctx context.Context) ([]string, error)
	DeadLetters(ctx context.Context, domain string) ([]DeadLetter, error)

	Kill(ctx context.Context, domain string, offset int64, reason string) (Head, error)
	Redrive(ctx context.Context, domain string, offset int64) (Head, error)
	ForceRelease(ctx context.Context, domain string) (Head, error)
	Pause(ctx context.Context, domain string) error
	Resume(ctx context.Context, domain string) (Head, error)
	Reap(ctx context.Context) ([]Expiry, error)
	Forget(ctx context.Context, domain string) error

	// The pull calls: producers enqueue offsets with their payloads, and
	// workers claim ready domains' heads and end them with Succeed,
	// SucceedMany, ClaimNext or Retry. Every backend keeps payloads, up
	// to the limit of WithMaxPayload, until their offsets succeed.
	// EnqueueAt stores an offset that may not be granted before a time;
	// Append stores a payload under the offset the backend assigns next
	// in the domain, unique across all of the backend's producers, with an
	// optional idempotency key; Cancel ends a queued or scheduled offset
	// (or, asked to, the one in flight) so that it never runs. SucceedMany
	// answers each claim as Succeed would; the claims of a domain named
	// more than once may be answered in any order. ClaimNext is
	// SucceedMany that also claims each domain's next offset for the
	// caller, up to MaxStreak times in a row, and answers a claim
	// repeated after its next lease was granted with that lease again
	// while it is in flight, as Manager.ClaimNext documents (after a
	// restart a backend may answer it as Succeed would); a lease that a
	// later claim of the same call ends is not among those it returns.
	// Domains that became ready at the same instant may be claimed in any
	// order.
	Enqueue(ctx context.Context, domain string, offset int64, payload []byte) (AcquireStatus, error)
	EnqueueAt(ctx context.Context, domain string, offset int64, payload []byte, notBefore time.Time) (AcquireStatus, error)
	Append(ctx context.Context, domain string, payload []byte, opts AppendOptions) (AppendResult, error)
	Cancel(ctx context.Context, domain string, offset int64, inFlight bool) (Head, error)
	Claim(ctx context.Context, n int) ([]Claim, error)
	WaitClaim(ctx context.Context, n int, poll time.Duration) ([]Claim, error)
	Retry(ctx context.Context, domain string, tok Token, cause error, delay time.Duration) (RetryResult, error)
	SucceedMany(ctx context.Context, claims []Claim) ([]error, error)
	ClaimNext(ctx context.Context, claims []Claim) ([]Claim, []error, error)

	// The batch calls of failed attempts and renewals: RetryMany is Retry
	// and ExtendMany is Extend (by one duration) for each lease, in one
	// call, as a worker pool makes them for its jobs. Each answers every
	// lease as the single call would, in the order given (a domain named
	// more than once finds its token spent the second time), and returns
	// an error of its own, with nothing for the leases, if the batch
	// failed as a whole. A backend that does I/O makes each one round
	// trip.
	RetryMany(ctx context.Context, failures []Failure) ([]RetryResult, []error, error)
	ExtendMany(ctx context.Context, claims []Claim, d time.Duration) ([]time.Time, []error, error)

	// The listing calls page through what the backend holds, for
	// operators: each returns one page and the cursor of the next, and
	// changes nothing (see DomainQuery, LeaseQuery, DeadLetterQuery and the
	// Manager's methods of the same names). Their order is the backend's
	// own, the same from page to page: PostgreSQL's is by key, the
	// Manager's by hash. ListLeases lists the soonest to expire first.
	// A cursor that is not the Next of a page of the same call on the same
	// backend is refused with an error matching ErrInvalidCursor, and a
	// Limit out of range with one matching ErrInvalidLimit. While the
	// backend changes between pages, an item that is there and matches
	// the query for the whole listing is listed exactly once.
	// InspectDeadLetter returns one dead letter with its payload, where the
	// backend keeps one. Stats returns the counts of transitions, and
	// Totals how much the backend holds, whoever stored it: its Queued is
	// the depth of the whole backend, which a process that only works
	// reads as well as a producer. Both visit every domain.
	ListDomains(ctx context.Context, q DomainQuery) (DomainPage, error)
	ListLeases(ctx context.Context, q LeaseQuery) (LeasePage, error)
	ListDeadLetters(ctx context.Context, q DeadLetterQuery) (DeadLetterPage, error)
	InspectDeadLetter(ctx context.Context, domain string, offset int64) (DeadLetter, error)
	Stats(ctx context.Context) (Stats, error)
	Totals(ctx context.Context) (Totals, error)

	// Close releases what the backend holds; every later call returns an
	// error matching ErrClosed.
	Close() error
}

// Backend returns m as a Backend. Each call first returns ctx.Err() if ctx
// is already done, changing nothing; otherwise it is m's method of the same
// name, which never blocks on I/O under a lock and so does not watch ctx
// while it runs (WaitClaim, which takes ctx itself, watches it while it
// waits). Closing the Backend closes m.
func (m *Manager) Backend() Backend { return managerBackend{m} }

// managerBackend adapts a Manager to Backend.
type managerBackend struct{ m *Manager }

var _ Backend = managerBackend{}

func (b managerBackend) TryAcquire(ctx context.Context, domain string, offset int64) (AcquireResult, error) {
	if err := ctx.Err(); err != nil {
		return AcquireResult{}, err
	}
	return b.m.TryAcquire(domain, offset)
}

func (b managerBackend) Succeed(ctx context.Context, domain string, tok Token) (SucceedResult, error) {
	if err := ctx.Err(); err != nil {
		return SucceedResult{}, err
	}
	return b.m.Succeed(domain, tok)
}

func (b managerBackend) SucceedNext(ctx context.Context, domain string, tok Token) (SucceedResult, error) {
	if err := ctx.Err(); err != nil {
		return SucceedResult{}, err
	}
	return b.m.SucceedNext(domain, tok)
}

func (b managerBackend) Fail(ctx context.Context, domain string, tok Token, cause error) (FailResult, error) {
	if err := ctx.Err(); err != nil {
		return FailResult{}, err
	}
	return b.m.Fail(domain, tok, cause)
}

func (b managerBackend) FailNext(ctx context.Context, domain string, tok Token, cause error) (FailResult, error) {
	if err := ctx.Err(); err != nil {
		return FailResult{}, err
	}
	return b.m.FailNext(domain, tok, cause)
}

func (b managerBackend) Extend(ctx context.Context, domain string, tok Token, d time.Duration) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return b.m.Extend(domain, tok, d)
}

func (b managerBackend) Inspect(ctx context.Context, domain string) (DomainInfo, error) {
	if err := ctx.Err(); err != nil {
		return DomainInfo{}, err
	}
	return b.m.Inspect(domain)
}

func (b managerBackend) Leases(ctx context.Context) ([]LeaseInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.m.Leases()
}

func (b managerBackend) Domains(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.m.Domains()
}

func (b managerBackend) DeadLetters(ctx context.Context, domain string) ([]DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.m.DeadLetters(domain)
}

func (b managerBackend) Kill(ctx context.Context, domain string, offset int64, reason string) (Head, error) {
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	return b.m.Kill(domain, offset, reason)
}

func (b managerBackend) Redrive(ctx context.Context, domain string, offset int64) (Head, error) {
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	return b.m.Redrive(domain, offset)
}

func (b managerBackend) ForceRelease(ctx context.Context, domain string) (Head, error) {
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	return b.m.ForceRelease(domain)
}

func (b managerBackend) Pause(ctx context.Context, domain string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.m.Pause(domain)
}

func (b managerBackend) Resume(ctx context.Context, domain string) (Head, error) {
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	return b.m.Resume(domain)
}

func (b managerBackend) Reap(ctx context.Context) ([]Expiry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.m.Reap()
}

func (b managerBackend) Forget(ctx context.Context, domain string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.m.Forget(domain)
}

func (b managerBackend) Enqueue(ctx context.Context, domain string, offset int64, payload []byte) (AcquireStatus, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return b.m.Enqueue(domain, offset, payload)
}

func (b managerBackend) EnqueueAt(ctx context.Context, domain string, offset int64, payload []byte, notBefore time.Time) (AcquireStatus, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return b.m.EnqueueAt(domain, offset, payload, notBefore)
}

func (b managerBackend) Append(ctx context.Context, domain string, payload []byte, opts AppendOptions) (AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return AppendResult{}, err
	}
	return b.m.Append(domain, payload, opts)
}

func (b managerBackend) Cancel(ctx context.Context, domain string, offset int64, inFlight bool) (Head, error) {
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	return b.m.Cancel(domain, offset, inFlight)
}

func (b managerBackend) Claim(ctx context.Context, n int) ([]Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.m.Claim(n)
}

func (b managerBackend) WaitClaim(ctx context.Context, n int, poll time.Duration) ([]Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.m.WaitClaim(ctx, n, poll)
}

// WaitClaimInto is WaitClaim, answered in out[:0], as ClaimNextInto.
func (b managerBackend) WaitClaimInto(ctx context.Context, n int, poll time.Duration, out []Claim) ([]Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.m.waitClaim(ctx, n, poll, out)
}

func (b managerBackend) Retry(ctx context.Context, domain string, tok Token, cause error, delay time.Duration) (RetryResult, error) {
	if err := ctx.Err(); err != nil {
		return RetryResult{}, err
	}
	return b.m.Retry(domain, tok, cause, delay)
}

func (b managerBackend) SucceedMany(ctx context.Context, claims []Claim) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.m.SucceedMany(claims)
}

func (b managerBackend) ClaimNext(ctx context.Context, claims []Claim) ([]Claim, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return b.m.ClaimNext(claims)
}

// ClaimNextInto is ClaimNext, answered in next[:0] and errs[:0], each grown
// as needed, so that a caller that keeps them from call to call ends its
// leases without allocating: package worker asks for it through an
// interface of its own.
func (b managerBackend) ClaimNextInto(ctx context.Context, claims, next []Claim, errs []error) ([]Claim, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return b.m.succeedMany(&callClaimNext, claims, true, next, errs)
}

// SucceedManyInto is SucceedMany, answered in errs[:0], as ClaimNextInto.
func (b managerBackend) SucceedManyInto(ctx context.Context, claims []Claim, errs []error) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, errs, err := b.m.succeedMany(&callSucceedMany, claims, false, nil, errs)
	return errs, err
}

func (b managerBackend) RetryMany(ctx context.Context, failures []Failure) ([]RetryResult, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return b.m.RetryMany(failures)
}

func (b managerBackend) ExtendMany(ctx context.Context, claims []Claim, d time.Duration) ([]time.Time, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return b.m.ExtendMany(claims, d)
}

func (b managerBackend) ListDomains(ctx context.Context, q DomainQuery) (DomainPage, error) {
	if err := ctx.Err(); err != nil {
		return DomainPage{}, err
	}
	return b.m.ListDomains(q)
}

func (b managerBackend) ListLeases(ctx context.Context, q LeaseQuery) (LeasePage, error) {
	if err := ctx.Err(); err != nil {
		return LeasePage{}, err
	}
	return b.m.ListLeases(q)
}

func (b managerBackend) ListDeadLetters(ctx context.Context, q DeadLetterQuery) (DeadLetterPage, error) {
	if err := ctx.Err(); err != nil {
		return DeadLetterPage{}, err
	}
	return b.m.ListDeadLetters(q)
}

func (b managerBackend) InspectDeadLetter(ctx context.Context, domain string, offset int64) (DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return DeadLetter{}, err
	}
	return b.m.InspectDeadLetter(domain, offset)
}

// Stats is the Manager's Stats; it returns the Manager's counts after
// Close too, with no error.
func (b managerBackend) Stats(ctx context.Context) (Stats, error) {
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	return b.m.Stats(), nil
}

func (b managerBackend) Totals(ctx context.Context) (Totals, error) {
	if err := ctx.Err(); err != nil {
		return Totals{}, err
	}
	return b.m.Totals()
}

func (b managerBackend) Close() error { return b.m.Close() }
