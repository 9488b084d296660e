package worklease

// checkOpen returns the error every call returns once the Manager is closed or
// its journal has failed, and for a zero or nil Manager; nil otherwise.
func (m *Manager) checkOpen() error {
	if m == nil || !m.open.Load() {
		return m.notOpenErr()
	}
	return nil
}

// notOpenErr is checkOpen's answer for a Manager that is not open.
func (m *Manager) notOpenErr() error {
	if m == nil || m.shards == nil {
		return errNotNew
	}
	if f := m.failure.Load(); f != nil {
		return *f
	}
	return ErrClosed
}

// errNotNew is what a Manager that New did not make returns.
var errNotNew error = notNewError{}

// notNewError is the error of a zero or nil Manager. It matches ErrClosed,
// as such a Manager is never open.
type notNewError struct{}

func (notNewError) Error() string {
	return "worklease: manager is not usable: the zero Manager and a nil one are not open; use New"
}

func (notNewError) Is(target error) bool { return target == ErrClosed }

// accepts reports whether a call on domain, at offset, may go ahead: the
// Manager is open, domain is a valid domain key and offset is not
// negative. Calls that take no offset pass 0. Every call on one domain
// starts with it (see enter), before it changes anything, and returns
// refuse's error if it fails. It is kept small enough to inline, as the
// hot path runs it on every call.
func (m *Manager) accepts(domain string, offset int64) bool {
	// uint(len-1) folds the empty domain into the length check.
	return m != nil && m.open.Load() && uint(len(domain)-1) < MaxDomainLen && offset >= 0
}

// refuse returns the error of the call c, which enter refused: the first
// of these that applies, in this order: the Manager is not open
// (ErrClosed, or the journal's failure), domain is invalid
// (ErrInvalidDomain), offset is negative (ErrInvalidOffset), the call's
// other arguments are (c.invalid).
func (m *Manager) refuse(c *callSpec, domain string, offset int64) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	switch {
	case !validDomain(domain):
		return domainError(c.op, domain, ErrInvalidDomain)
	case offset < 0:
		return domainError(c.op, domain, ErrInvalidOffset)
	}
	return domainError(c.op, domain, c.invalid)
}

// validDomain reports whether a call accepts domain. A journal written
// before domains were bounded may hold others: the Manager keeps them, and
// writes no record of them (see Reap).
func validDomain(domain string) bool { return len(domain) > 0 && len(domain) <= MaxDomainLen }
