package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/worklease/worklease"
)

// maxClaimBatch is the most leases one claim asks for: a Pool with more
// idle workers claims for them in turns.
const maxClaimBatch = 1000

// claimCooldown is how long the claimer waits at least between the start
// of a claim that found less ready than it asked for and the start of the
// next: the next one then claims for the workers that became idle
// meanwhile together, rather than for each as it does.
const claimCooldown = time.Millisecond

// A claimer makes the claims of a Pool's idle workers: one WaitClaim for
// all the workers that wait, sized to them, made by one of them (the
// leader) while the others wait for its answer. The leader takes the
// first claim, gives the others to the workers that waited longest, and
// hands the next claim to the first worker still waiting. WaitClaim waits
// for work itself, woken by the backend when a domain becomes ready.
//
// A worker that waits does not leave until the claim under way is
// answered (a Pool that stops cancels it), so that every lease claimed
// has a worker to run it: claims never outnumber the workers that asked.
type claimer struct {
	p *Pool

	mu        sync.Mutex // guards everything below
	waiting   []*worker  // idle workers waiting for the leader's claim, the longest first
	leading   bool       // a worker claims
	shortFrom time.Time  // when the last claim that found less than it asked for began; zero if the last did not

	// buf holds the claims of a backend that answers in its caller's
	// buffer (see waitClaimInto). Only the leader uses it, and it leaves
	// it empty before it hands the lead on.
	buf []worklease.Claim
}

// A backend may answer WaitClaim in a buffer its caller keeps, as the
// Manager's does.
type waitClaimInto interface {
	WaitClaimInto(ctx context.Context, n int, poll time.Duration, out []worklease.Claim) ([]worklease.Claim, error)
}

// claim returns a claim for w, waiting for one, or false once the Pool
// stops.
func (c *claimer) claim(w *worker) (worklease.Claim, bool) {
	c.mu.Lock()
	if c.p.isStopping() {
		c.mu.Unlock()
		return worklease.Claim{}, false
	}
	if c.leading {
		c.waiting = append(c.waiting, w)
		c.mu.Unlock()
		<-w.claimed
		if !w.lead {
			cl, ok := w.claim, w.claimOK
			w.claim, w.claimOK = worklease.Claim{}, false
			return cl, ok
		}
		w.lead = false
		c.mu.Lock()
	} else {
		c.leading = true
	}
	return c.lead()
}

// lead makes claims until one comes back, for the calling worker and
// those waiting; c.mu must be held, and is released.
func (c *claimer) lead() (worklease.Claim, bool) {
	p := c.p
	failures := 0 // claims that failed in a row
	for {
		if p.isStopping() {
			for _, x := range c.waiting {
				x.claimed <- struct{}{} // with no claim: stop
			}
			clear(c.waiting)
			c.waiting, c.leading = c.waiting[:0], false
			c.mu.Unlock()
			return worklease.Claim{}, false
		}
		n := min(1+len(c.waiting), maxClaimBatch)
		wait := time.Duration(0)
		if !c.shortFrom.IsZero() {
			wait = claimCooldown - time.Since(c.shortFrom)
		}
		c.mu.Unlock()
		if wait > 0 && !sleepReal(wait, p.stopping) {
			c.mu.Lock()
			continue
		}
		began := time.Now()
		var cs []worklease.Claim
		var err error
		if p.claimInto != nil {
			cs, err = p.claimInto.WaitClaimInto(p.claimCtx, n, p.cfg.poll, c.buf)
		} else {
			cs, err = p.b.WaitClaim(p.claimCtx, n, p.cfg.poll)
		}
		if err != nil {
			if p.claimCtx.Err() == nil {
				p.callFailed(fmt.Errorf("worker: WaitClaim: %w", err))
				p.sleep(p.cfg.backoff.Delay(failures), p.stopping)
				failures++
			}
			c.mu.Lock()
			continue
		}
		failures = 0
		c.mu.Lock()
		c.shortFrom = time.Time{}
		if len(cs) < n {
			c.shortFrom = began
		}
		if len(cs) == 0 {
			continue
		}
		// Claims go to the workers that asked, the leader first: there are
		// no more of them than n, and no worker that waited has left.
		first := cs[0]
		for _, cl := range cs[1:] {
			x := c.waiting[0]
			c.waiting = c.waiting[1:]
			x.claim, x.claimOK = cl, true
			x.claimed <- struct{}{}
		}
		if p.claimInto != nil { // keep the buffer, and none of its payloads
			zero(cs)
			c.buf = cs[:0]
		}
		if len(c.waiting) > 0 {
			next := c.waiting[0]
			c.waiting = c.waiting[1:]
			next.lead = true
			next.claimed <- struct{}{}
		} else {
			c.leading = false
		}
		c.mu.Unlock()
		return first, true
	}
}

// sleepReal waits d in real time, and reports whether it did: false if
// stop was closed first. The claimer's pace is real time, whatever clock
// the Pool reads.
func sleepReal(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
