package worklease

import "time"

// A Claim is one lease Claim granted: the head of its domain, with what
// Enqueue stored with it.
type Claim struct {
	Domain    string
	Offset    int64
	Payload   []byte // nil if the offset was stored without one
	Token     Token
	Attempt   int       // this grant's attempt number: 1, then one more after each failed attempt
	ExpiresAt time.Time // zero if leases never expire
}

// A RetryResult is what Retry did.
type RetryResult struct {
	// DeadLettered: the offset ran out of retries and is failed, with the
	// cause given; otherwise it waits at the front of its domain's line.
	DeadLettered bool
	// RetryCount is the offset's failed attempts so far, this one
	// included: pass it to Backoff.Delay for the next delay. (Fail's
	// RetryCount counts the retries scheduled, not the attempts failed:
	// after a give-up they differ by one.)
	RetryCount int
}
