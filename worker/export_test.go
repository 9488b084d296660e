package worker

import (
	"time"

	fakeclock "github.com/worklease/worklease/internal/clock"
)

// Hooks for the black-box tests in package worker_test.

// WithClock makes the Pool read the time and wait on c, the fake clock a
// test gives its Manager too.
func WithClock(c *fakeclock.Fake) Option {
	return optionFunc(func(cfg *config) { cfg.clock = fakeClock{c} })
}

type fakeClock struct{ *fakeclock.Fake }

func (f fakeClock) AfterFunc(d time.Duration, fn func()) timer { return f.Fake.AfterFunc(d, fn) }

// WithPoll sets the poll of the Pool's WaitClaim calls: with a fake clock,
// how soon a claim sees a retry's delay ended by the clock's move.
func WithPoll(d time.Duration) Option { return optionFunc(func(cfg *config) { cfg.poll = d }) }

// WithEndBatches sets how many calls that end attempts the Pool makes at
// once, of each kind, and how many attempts each ends at most.
func WithEndBatches(calls, size int) Option {
	return optionFunc(func(cfg *config) { cfg.endCalls, cfg.endBatch = calls, size })
}

// PendingEnds returns how many of p's workers wait for a call to end
// their attempts with ClaimNext.
func PendingEnds(p *Pool) int {
	p.nexts.mu.Lock()
	defer p.nexts.mu.Unlock()
	return len(p.nexts.pending)
}
