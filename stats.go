package worklease

import "sync/atomic"

// Stats are counts of transitions since New, summed over all domains. Each
// field counts the events of one EventKind. A Manager rebuilt from a journal
// counts from zero: replay reports no new transitions.
type Stats struct {
	Acquired     uint64 // leases granted
	Enqueued     uint64 // offsets queued (duplicates not counted)
	Processed    uint64 // offsets that succeeded
	Retried      uint64 // retries scheduled by Fail
	DeadLettered uint64 // offsets given up on or killed
	Expired      uint64 // leases revoked because their time ran out
	Requeued     uint64 // offsets put back at the front after an expiry or a forced release
	Extended     uint64 // lease expiries moved later
	Rejected     uint64 // Succeed, Fail or Extend refused for a stale or wrong token
	OutOfOrder   uint64 // best-effort grants of an offset other than the backlog's head
	Killed       uint64 // offsets killed by an operator
	Redriven     uint64 // dead letters put back by an operator
	Released     uint64 // leases taken back by an operator
	Paused       uint64 // domains paused or parked
	Resumed      uint64 // domains resumed
	Forgotten    uint64 // domains forgotten
}

// counters are one shard's event counts. Each shard has its own, so that
// counting is not a point of contention between goroutines working on
// different domains.
type counters [numEventKinds]atomic.Uint64

func (c *counters) add(k EventKind) { c[k].Add(1) }

// Stats returns the counts of transitions so far. It reads each counter
// atomically but not all at once, so under load the fields may be from
// slightly different moments. It is cheap enough to call often.
func (m *Manager) Stats() Stats {
	var sum [numEventKinds]uint64
	for i := range m.shards {
		for k := range sum {
			sum[k] += m.shards[i].stats[k].Load()
		}
	}
	return Stats{
		Acquired:     sum[EventAcquired],
		Enqueued:     sum[EventEnqueued],
		Processed:    sum[EventProcessed],
		Retried:      sum[EventRetrying],
		DeadLettered: sum[EventDeadLettered],
		Expired:      sum[EventExpired],
		Requeued:     sum[EventRequeued],
		Extended:     sum[EventExtended],
		Rejected:     sum[EventRejected],
		OutOfOrder:   sum[EventOutOfOrder],
		Killed:       sum[EventKilled],
		Redriven:     sum[EventRedriven],
		Released:     sum[EventReleased],
		Paused:       sum[EventPaused],
		Resumed:      sum[EventResumed],
		Forgotten:    sum[EventForgotten],
	}
}
