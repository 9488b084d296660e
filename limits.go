package worklease

// Limits on what a call takes. They bound every string a transition
// journals, so that a journal can take any record a Manager writes (see
// Journal), and they hold with or without a journal.
const (
	// MaxDomainLen is the longest domain key, in bytes, that a call
	// accepts. Every call that takes a domain returns an error wrapping
	// ErrInvalidDomain for a longer one, or for the empty domain, and
	// changes nothing.
	MaxDomainLen = 4096

	// MaxCauseLen is the longest text, in bytes, that a dead letter, an
	// event or a journal record keeps for a failure's cause. A longer
	// Fail cause or Kill reason is not refused (the work has failed
	// already): its text is cut to at most MaxCauseLen bytes, at a UTF-8
	// boundary, and the cut text is what DeadLetter.Cause reports, before
	// and after a restart. A cut Fail cause still unwraps to the caller's
	// error.
	MaxCauseLen = 4096

	// MaxKeyLen is the longest idempotency key, in bytes, that Append
	// accepts; a longer one is refused with ErrInvalidKey.
	MaxKeyLen = 256
)

// Limits on payloads. A payload is read whole into memory for every
// attempt, and a journal writes it whole with its record: an input larger
// than a few megabytes belongs in blob storage, with a reference to it as
// the payload.
const (
	// DefaultMaxPayload is the longest payload, in bytes, that Enqueue,
	// EnqueueAt and Append accept unless WithMaxPayload says otherwise; a
	// longer one is refused with ErrPayloadTooLarge and nothing is
	// stored.
	DefaultMaxPayload = 1 << 20

	// MaxPayloadLimit is the highest limit WithMaxPayload accepts.
	MaxPayloadLimit = 16 << 20
)

// MaxStreak is how many leases in a row ClaimNext grants a domain since
// Claim last claimed it; the next time, the domain goes behind the other
// ready domains instead, so that a worker that keeps going through one
// deep backlog does not starve the others. Every backend counts the same.
const MaxStreak = 8
