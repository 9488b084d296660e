package pg

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/worklease/worklease"
)

// The database notifies the channel readyChannel, with the schema's quoted
// name as the text, when a call of any process makes one of the schema's
// domains ready for claims.
const readyChannel = "worklease_ready"

// DefaultPoll is how long WaitClaim waits at most between two claims when
// no notification comes: a domain whose retry delay ends becomes ready
// with no call to notify it, and a notification can be lost with the
// listening connection.
const DefaultPoll = time.Second

// recheckFirst is how long a waiting claim waits, after a claim that
// found nothing, before it claims again with no notification; each wait
// after another claim that found nothing is twice the one before, up to
// the poll. A call that makes a domain ready notifies only if it saw no
// other ready domain when its statement began, and a claim passes over
// the ready domains that another call holds locked (a producer storing
// into them, say): under load, a domain can become ready with no
// notification for the claim that has just found nothing. Waiting a poll
// for it left a Pool on PostgreSQL idle for most of a second, several
// times a run. One waiting claim of a Manager at a time rechecks so (see
// listener.rechecking): a Pool waits in one claim anyway, and a dozen
// workers that each wait in their own would claim a dozen times as often
// for nothing.
const recheckFirst = 5 * time.Millisecond

// A listener wakes the Manager's waiting claims when the database says a
// domain became ready. It listens on a connection of its own, outside the
// pool, from the first WaitClaim until Close. A notification wakes one
// waiting claim, not all: a completion that leaves its domain ready, when
// no other is, notifies, and waking every idle worker for it would have
// them all claim for one domain. A claim that comes back full wakes
// another if more domains are ready.
type listener struct {
	mu      sync.Mutex    // guards the fields below
	signal  chan struct{} // holds one wake-up, for the next waiting claim
	stop    context.CancelFunc
	stopped chan struct{} // closed when the listening goroutine ends
	closed  bool          // by Close: no goroutine starts again
	done    chan struct{} // closed by Close, which wakes every waiting claim
	drop    func()        // closes the listening connection, which is then made again; nil while there is none
	// rechecking: a waiting claim waits short and rechecks (see
	// recheckFirst); the others wait for a notification or their poll.
	rechecking bool
}

// beginRecheck makes the caller the waiting claim that rechecks, and
// reports whether it is: false while another is.
func (l *listener) beginRecheck() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rechecking {
		return false
	}
	l.rechecking = true
	return true
}

// endRecheck ends the caller's turn to recheck.
func (l *listener) endRecheck() {
	l.mu.Lock()
	l.rechecking = false
	l.mu.Unlock()
}

// reconnect closes the listening connection, if there is one: a call found
// its server read-only, and the connection made next reaches the server
// that takes writes, where the calls that make domains ready notify.
func (l *listener) reconnect() {
	l.mu.Lock()
	drop := l.drop
	l.mu.Unlock()
	if drop != nil {
		drop()
	}
}

// closing returns the channel Close closes.
func (l *listener) closing() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	return l.done
}

// woken returns the channel a notification sends a wake-up on, starting
// the listening goroutine if need be (after Close, a closed channel).
func (m *Manager) woken() <-chan struct{} {
	l := &m.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.done // closed
	}
	if l.signal == nil {
		l.signal = make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		l.stop, l.stopped = cancel, make(chan struct{})
		go m.listenReady(ctx, l.stopped)
	}
	return l.signal
}

// wake wakes one waiting claim, or the next to wait.
func (l *listener) wake() {
	select {
	case l.signal <- struct{}{}:
	default: // one is pending already
	}
}

// close stops the listening goroutine, if it runs, waits for it, and wakes
// every waiting claim.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	if l.done == nil {
		l.done = make(chan struct{})
	}
	close(l.done)
	stop, stopped := l.stop, l.stopped
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-stopped
	}
}

// listenReady listens for the schema's notifications until ctx ends, on a
// connection of its own; if the connection fails, or reconnect closes it,
// it wakes a waiter (a notification may have been lost) and connects
// again, after a pause that doubles, from listenRetryMin to listenRetryMax,
// with each try that finds no server to listen on: so that after a
// failover waiting claims are woken again as soon as the new primary
// takes connections, without trying a server that is down in a loop.
func (m *Manager) listenReady(ctx context.Context, stopped chan<- struct{}) {
	defer close(stopped)
	pause := listenRetryMin
	for {
		once, drop := context.WithCancel(ctx)
		m.listen.mu.Lock()
		m.listen.drop = drop
		m.listen.mu.Unlock()
		listened := m.listenOnce(once)
		drop()
		m.listen.mu.Lock()
		m.listen.drop = nil
		m.listen.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		m.listen.wake() // a notification may have been lost
		if listened {
			pause = listenRetryMin
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, listenRetryMax)
	}
}

// The pauses between the listening connection's tries (see listenReady).
const (
	listenRetryMin = 50 * time.Millisecond
	listenRetryMax = time.Second
)

// listenOnce connects, listens and relays notifications until the
// connection fails or ctx ends, and reports whether it listened. Waiting
// claims poll meanwhile. Once it listens it wakes a waiting claim: a
// domain may have become ready while no connection listened.
func (m *Manager) listenOnce(ctx context.Context) (listened bool) {
	conn, err := m.connect(ctx)
	if err != nil {
		return false
	}
	defer m.disconnect(conn)
	if _, err := conn.Exec(ctx, "LISTEN "+readyChannel); err != nil {
		return false
	}
	m.listen.wake()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		if n.Payload == m.schema {
			m.listen.wake()
		}
	}
}

// WaitClaim is Claim that waits for work: when nothing is ready it waits
// until the database notifies the Manager that a call of any process made
// one of the schema's domains ready (a notification wakes one waiting
// claim of the Manager, and a claim that comes back full wakes another if
// more are ready), or poll has passed (0 means DefaultPoll; each wait is
// jittered by up to a fifth, so that idle workers do not poll together),
// and claims again, until it claims something or ctx ends, whose error it
// then returns, or the Manager is closed. The notifications come on a
// connection of the Manager's own, made as the pool makes one (see the
// package documentation), opened by the first WaitClaim and closed by
// Close; without it, waiting claims poll. One waiting claim of the
// Manager at a time waits shorter than poll at first, from a few
// milliseconds, doubling (see recheckFirst), so that a domain made ready
// with no notification for it is claimed soon.
func (m *Manager) WaitClaim(ctx context.Context, n int, poll time.Duration) ([]worklease.Claim, error) {
	if poll <= 0 {
		poll = DefaultPoll
	}
	closing := m.listen.closing()
	turn := false             // whether this claim has had its turn to recheck
	var recheck time.Duration // while it is its turn, its next short wait
	defer func() {
		if recheck > 0 {
			m.listen.endRecheck()
		}
	}()
	for {
		wake := m.woken()
		claims, more, err := m.claim(ctx, n, true)
		if more {
			m.listen.wake() // another waiting claim may take it
		}
		if err != nil || len(claims) > 0 {
			return claims, err
		}
		if !turn && m.recheck > 0 && m.listen.beginRecheck() {
			turn, recheck = true, m.recheck
		}
		wait := poll
		if recheck >= poll {
			m.listen.endRecheck()
			recheck = 0
		} else if recheck > 0 {
			wait, recheck = recheck, 2*recheck
		}
		timer := time.NewTimer(wait - time.Duration(rand.Int64N(int64(wait)/5+1)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-wake:
			timer.Stop()
			if ctx.Err() != nil {
				m.listen.wake() // this claim leaves: the wake-up is another's
				return nil, ctx.Err()
			}
		case <-closing: // the next Claim says so
			timer.Stop()
		case <-timer.C:
		}
	}
}
