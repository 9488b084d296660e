package workleasekafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// A Handler processes one record. It returns nil when the record is done,
// and an error to fail the attempt: the record is tried again after the
// Consumer's backoff, before any later record of its key, until it has no
// retries left (see WithMaxRetries). A panic fails the attempt too, with a
// *worker.PanicError as its error.
//
// ctx is cancelled when the attempt should stop: when the record's
// partition was revoked and the handler ran past WithRevokeTimeout, or was
// lost (the cause is ErrRevoked), and when the Consumer stops without
// waiting (the cause is ErrStopped). The record is then left unfinished,
// for the partition's next owner or the next run. A handler must return
// soon after ctx is done, and must not keep ctx for work that outlives
// it: the partition's handlers share it, and it is not cancelled when
// one of them returns. The Consumer runs handlers of different keys at
// once, one at a time for each key, in offset order; r is shared and must
// not be modified.
type Handler func(ctx context.Context, r *kgo.Record) error

// A Consumer consumes Kafka topics in a consumer group, running a Handler
// on many records of each partition at once: one record at a time per key,
// in the partition's order, on a worker.Pool over an in-memory
// worklease.Manager. Use New; the zero Consumer is not usable. Its methods
// are safe for concurrent use.
type Consumer struct {
	cfg   config
	h     Handler
	cl    *kgo.Client
	m     *worklease.Manager
	pool  *worker.Pool
	chain worker.Handler // the middleware around the handler's call
	// pollMin is how many records may be handed over at once however
	// many the handlers have (up to what is left below WithMaxUnfinished,
	// if more): no more than WithMaxUnfinished, so that handing over goes
	// past it by that at most.
	pollMin int
	budget  *budget
	ahead   *aheadQueue // the records polled ahead of the handlers

	// byPrefix maps the domain prefix of each partition assigned, or
	// retired and not drained, to the partition: the Pool's handler finds
	// a record's partition there. Replaced whole, under mu.
	byPrefix atomic.Pointer[map[string]*partition]

	mu          sync.Mutex // guards everything below
	owned       map[topicPartition]*partition
	retired     []*partition
	assignments uint64 // assignments made, which number each partition's prefix
	ran         bool   // Run was called
	closing     bool   // Close was called
	grace       context.Context

	commitMu sync.Mutex  // held while a commit is computed and sent
	crashed  atomic.Bool // commit nothing, as a member that died would not (tests)

	stopCtx context.Context    // done once the Consumer stops: polling and scheduled commits end
	stop    context.CancelFunc // sets stopped, then cancels stopCtx
	// stopped is set once the Consumer stops: batches read it between
	// records, which a load does more cheaply than a look at stopCtx.
	stopped atomic.Bool
	done    chan struct{} // closed when Run has returned

	// handlerCtx is what the partitions' contexts, which their handlers
	// run with, derive from: it carries Run's context's values, and is
	// cancelled, with ErrStopped, when the Consumer stops without waiting
	// for the handlers. Set by Run before the Pool runs.
	handlerCtx     context.Context
	cancelHandlers context.CancelCauseFunc

	handled, retried, deadLettered, panicked, skipped, commits atomic.Uint64
}

type topicPartition struct {
	topic     string
	partition int32
}

// New returns a Consumer that runs h on the records of a consumer group,
// through a kgo.Client it makes from clientOpts, configured by opts. The
// client options must name the group (kgo.ConsumerGroup) and what to
// consume (kgo.ConsumeTopics or kgo.ConsumeRegex); the Consumer adds
// kgo.DisableAutoCommit, kgo.BlockRebalanceOnPoll and its own
// OnPartitionsAssigned, OnPartitionsRevoked, OnPartitionsLost and
// OnOffsetsFetched, which replace any given, and sets kgo.FetchMaxWait to
// DefaultFetchMaxWait unless the client options set it. The client starts joining the
// group at once; records are handled from Run on. New returns an error
// wrapping worklease.ErrInvalidConfig for an invalid option, of either
// kind. Close the Consumer to release the client.
func New(clientOpts []kgo.Opt, h Handler, opts ...Option) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: workleasekafka: New needs a handler", worklease.ErrInvalidConfig)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, h: h, owned: map[topicPartition]*partition{}, done: make(chan struct{})}
	c.pollMin = min(1000, cfg.maxUnfinished)
	c.budget = newBudget(cfg.maxUnfinished)
	c.ahead = newAheadQueue(cfg.maxUnfinished)
	var cancelStop context.CancelFunc
	c.stopCtx, cancelStop = context.WithCancel(context.Background())
	c.stop = func() {
		c.stopped.Store(true)
		cancelStop()
	}
	c.byPrefix.Store(&map[string]*partition{})
	c.chain = c.call
	for i := len(cfg.middleware) - 1; i >= 0; i-- {
		if c.chain = cfg.middleware[i](c.chain); c.chain == nil {
			c.stop()
			return nil, fmt.Errorf("%w: workleasekafka: WithMiddleware: middleware %d returned a nil handler", worklease.ErrInvalidConfig, i)
		}
	}
	// The Consumer counts attempts and gives up itself, so that giving up
	// can wait for a dead letter to be produced: the Manager never does.
	c.m, err = worklease.New(worklease.WithMonotonicOffsets(), worklease.WithMaxRetries(math.MaxInt32))
	if err != nil {
		c.stop()
		return nil, err
	}
	// The queue has no limit: Submit never waits, so that a poll's records
	// are handed over at once and rebalances are not held back; the
	// Consumer bounds its records itself, by pausing partitions.
	c.pool, err = worker.New(c.m.Backend(), c.handleJob,
		worker.WithWorkers(cfg.handlers), worker.WithQueueLimit(0),
		worker.WithBackoff(cfg.backoff), worker.WithErrorFunc(c.report))
	if err != nil {
		c.stop()
		_ = c.m.Close()
		return nil, err
	}
	// Fetching a partition resumed after a pause waits for the broker's
	// fetch in flight, which waits up to FetchMaxWait for new records of
	// the partitions it asks for: kgo's 5s would stall a paused partition
	// that much whenever the others are caught up. Options given after
	// this one override it.
	kopts := make([]kgo.Opt, 0, len(clientOpts)+7)
	kopts = append(kopts, kgo.FetchMaxWait(DefaultFetchMaxWait))
	for _, o := range clientOpts {
		if o != nil {
			kopts = append(kopts, o)
		}
	}
	kopts = append(kopts,
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.assigned), kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost), kgo.OnOffsetsFetched(c.fetched))
	c.cl, err = kgo.NewClient(kopts...)
	if err != nil {
		c.stop()
		_ = c.m.Close()
		return nil, fmt.Errorf("%w: workleasekafka: %w", worklease.ErrInvalidConfig, err)
	}
	if group, _ := c.cl.OptValue(kgo.ConsumerGroup).(string); group == "" {
		c.cl.Close()
		c.stop()
		_ = c.m.Close()
		return nil, fmt.Errorf("%w: workleasekafka: the client options name no consumer group (kgo.ConsumerGroup)", worklease.ErrInvalidConfig)
	}
	return c, nil
}

// Client returns the Consumer's client, for producing, say, or for
// administration. Do not poll or commit with it, nor close it: the
// Consumer does.
func (c *Consumer) Client() *kgo.Client { return c.cl }

// Run consumes until Close, or until ctx ends, and returns once the
// Consumer is closed: nil after Close, and ctx's error if ctx ended first,
// which closes the Consumer as a Close that gives up waiting at once would.
// It polls the group's records and hands each to the handlers, commits
// every WithCommitInterval, and on revocation lets the partition's running
// handlers finish (within WithRevokeTimeout), commits what finished and
// drops the rest. Handlers' contexts carry ctx's values. Run may be called
// once; it returns ErrClosed if the Consumer was closed before, or Run
// called already.
func (c *Consumer) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.ran || c.closing {
		c.mu.Unlock()
		return ErrClosed
	}
	c.ran = true
	c.mu.Unlock()
	defer close(c.done)

	c.handlerCtx, c.cancelHandlers = context.WithCancelCause(context.WithoutCancel(ctx))
	poolDone := make(chan error, 1)
	go func() { poolDone <- c.pool.Run(context.WithoutCancel(ctx)) }()
	commitsDone := make(chan struct{})
	go func() {
		defer close(commitsDone)
		c.commitEvery()
	}()

	pollCtx, cancel := context.WithCancel(ctx)
	unlink := context.AfterFunc(c.stopCtx, cancel)
	c.poll(pollCtx)
	unlink()
	cancel()

	// Stop: commits on schedule end, the handlers running finish (or are
	// cancelled, if ctx ended or Close's context does), and leaving the
	// group revokes every partition, whose revocation commits them.
	c.mu.Lock()
	grace, closed := c.grace, c.closing
	c.closing = true
	c.mu.Unlock()
	if !closed || ctx.Err() != nil {
		var cancelled context.CancelFunc
		grace, cancelled = context.WithCancel(context.Background())
		cancelled()
	}
	c.stop()
	<-commitsDone
	// The handlers are cancelled when grace ends, as the Pool cancels its
	// jobs' contexts then.
	unlinkHandlers := context.AfterFunc(grace, func() { c.cancelHandlers(ErrStopped) })
	stopErr := c.pool.Stop(grace)
	poolErr := <-poolDone
	unlinkHandlers()
	c.cancelHandlers(ErrStopped)
	c.cl.Close()
	_ = c.m.Close()
	switch {
	case ctx.Err() != nil && !closed:
		return ctx.Err()
	case poolErr != nil && !errors.Is(poolErr, context.Canceled):
		return poolErr
	case stopErr != nil && !errors.Is(stopErr, context.Canceled):
		return stopErr
	}
	return nil
}

// Close stops the Consumer: it fetches no more, lets the handlers that run
// finish, commits every partition below its lowest unfinished record,
// leaves the group and closes the client, and returns once Run has
// returned. If ctx ends first, Close cancels the handlers (with ErrStopped
// as their context's cause), goes on as before without their records, and
// returns ctx's error. Records fetched and not started are left for the
// partitions' next owners. Close may be called more than once, and without
// Run.
func (c *Consumer) Close(ctx context.Context) error {
	c.mu.Lock()
	first := !c.closing
	if first {
		c.closing, c.grace = true, ctx
	}
	ran := c.ran
	c.mu.Unlock()
	c.stop()
	if !ran {
		if first {
			c.cl.Close()
			_ = c.m.Close()
		}
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		<-c.done
		return ctx.Err()
	}
}

// poll takes the group's records and submits them until ctx ends or the
// client is closed: a goroutine polls them ahead of the handlers (see
// pollAhead), and this one hands them to their partitions and the Pool as
// the handlers make room for them.
func (c *Consumer) poll(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		defer cancel() // the client closed: nothing more comes
		c.pollAhead(ctx)
	}()
	defer func() {
		cancel()
		<-polled
	}()
	var (
		names []string
		leads []batchLead
	)
	for {
		if !c.budget.wait(ctx, stuckAfter) {
			if ctx.Err() != nil {
				return
			}
			c.pauseStuck()
			continue
		}
		// A step takes all it may: the more records of a key one step
		// takes, the more of them go to the Pool as one job.
		p, recs, ok := c.ahead.take(ctx, c.budget.room(c.pollMin))
		if !ok {
			return
		}
		// A key function's keys are taken before the partition is
		// locked: it is the application's code.
		names = names[:0]
		if c.cfg.keyFunc != nil {
			for _, r := range recs {
				names = append(names, c.name(p, r))
			}
		}
		var skipped int
		leads, skipped = p.addAll(recs, names, leads[:0])
		c.skipped.Add(uint64(skipped))
		clear(names)
		clear(recs) // the partition holds those it keeps
		for _, l := range leads {
			c.submit(ctx, l)
		}
		clear(leads)
	}
}

// pollAhead polls the group's records into c.ahead until ctx ends or the
// client is closed: whenever the queue holds fewer than WithMaxUnfinished
// records, it takes all the client holds, so that the client fetches
// again while the handlers work on them.
func (c *Consumer) pollAhead(ctx context.Context) {
	for c.ahead.waitRoom(ctx) {
		fs := c.cl.PollRecords(ctx, 0)
		if ctx.Err() != nil || fs.IsClientClosed() {
			c.cl.AllowRebalance()
			return
		}
		fs.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				c.report(fmt.Errorf("workleasekafka: fetching %s/%d: %w", topic, partition, err))
			}
		})
		// Each partition's records are tied to its assignment now, while
		// the poll holds rebalances back (kgo.BlockRebalanceOnPoll): a
		// revocation after drops them, and a later assignment of the
		// partition fetches them again.
		c.mu.Lock()
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if p := c.owned[topicPartition{ftp.Topic, ftp.Partition}]; p != nil {
				c.ahead.push(p, ftp.Records)
			}
		})
		c.mu.Unlock()
		c.cl.AllowRebalance()
	}
}

// submit hands a batch to the Pool.
func (c *Consumer) submit(ctx context.Context, l batchLead) {
	st, err := c.pool.Submit(ctx, l.domain, l.offset, nil)
	switch {
	case err != nil:
		// Only a stopping Pool refuses: the batch stays unfinished, and
		// no commit passes it.
		if !errors.Is(err, worker.ErrStopped) && ctx.Err() == nil {
			c.report(fmt.Errorf("workleasekafka: submitting %s offset %d: %w", l.domain, l.offset, err))
		}
	case st != worklease.Enqueued:
		// A new assignment's domains are new, and its offsets grow: the
		// Manager has seen none of them.
		c.report(fmt.Errorf("workleasekafka: submitting %s offset %d: %v", l.domain, l.offset, st))
	}
}

// keyOf returns r's key, as WithKeyFunc says.
func (c *Consumer) keyOf(r *kgo.Record) string {
	if c.cfg.keyFunc != nil {
		return c.cfg.keyFunc(r)
	}
	return string(r.Key)
}

// stuckAfter is how long handing over is held back at the limit before the
// Consumer looks for a partition that holds it back, to pause.
const stuckAfter = 500 * time.Millisecond

// pauseStuck pauses fetching the partition that holds half the unfinished
// records the Consumer may hand its handlers, if one does while others are
// assigned, and sets its records aside from the limit, and those polled
// ahead of it from the queue's, so that a slow partition leaves room for
// the others. Only a partition that held handing over back for stuckAfter
// is paused: one that is merely fetched first does not hold it for long,
// and pausing costs what kgo fetched for the partition already, which it
// fetches again on resuming.
func (c *Consumer) pauseStuck() {
	c.mu.Lock()
	ps := make([]*partition, 0, len(c.owned))
	for _, p := range c.owned {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	if len(ps) < 2 {
		return
	}
	var most *partition
	n := 0
	for _, p := range ps {
		p.mu.Lock()
		if !p.paused && p.unfinished > n {
			most, n = p, p.unfinished
		}
		p.mu.Unlock()
	}
	if most == nil {
		return
	}
	most.mu.Lock()
	defer most.mu.Unlock()
	if !most.paused && !most.revoked && most.unfinished >= c.cfg.maxUnfinished/2 {
		c.cl.PauseFetchPartitions(map[string][]int32{most.topic: {most.id}})
		most.paused = true
		most.held.Store(true)
		most.budget.done(most.unfinished)
		c.ahead.heldChanged()
	}
}

// resumeFetch resumes fetching p once it is down to a quarter of what
// the Consumer may hold.
func (c *Consumer) resumeFetch(p *partition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused && !p.revoked && p.unfinished <= p.resumeBelow {
		p.held.Store(false)
		c.cl.ResumeFetchPartitions(map[string][]int32{p.topic: {p.id}})
		p.paused = false
		p.budget.add(p.unfinished)
		c.ahead.heldChanged()
	}
}

// assigned is the client's OnPartitionsAssigned: each partition assigned
// gets a new prefix for its records' domains.
func (c *Consumer) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, ids := range assigned {
		for _, id := range ids {
			tp := topicPartition{topic, id}
			if old := c.owned[tp]; old != nil { // assigned twice: the old assignment is over
				old.supersede()
				c.ahead.drop([]*partition{old})
				c.retired = append(c.retired, old)
			}
			c.assignments++
			c.owned[tp] = newPartition(topic, id, c.assignments, c.budget)
		}
	}
	c.publishLocked()
}

// fetched is the client's OnOffsetsFetched: it reads where each partition
// assigned begins, and what its commit's metadata says is finished above.
func (c *Consumer) fetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	// Older versions of the response list the topics at its top, newer
	// ones under each group.
	for _, t := range resp.Topics {
		for _, pr := range t.Partitions {
			c.fetchedOne(t.Topic, pr.Partition, pr.Offset, pr.Metadata, pr.ErrorCode)
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, pr := range t.Partitions {
				c.fetchedOne(t.Topic, pr.Partition, pr.Offset, pr.Metadata, pr.ErrorCode)
			}
		}
	}
	return nil
}

// fetchedOne records where an assigned partition begins: the commit at
// offset, with metadata; code is the fetch's error for it.
func (c *Consumer) fetchedOne(topic string, id int32, offset int64, metadata *string, code int16) {
	if code != 0 || offset < 0 {
		return
	}
	c.mu.Lock()
	p := c.owned[topicPartition{topic, id}]
	c.mu.Unlock()
	if p == nil {
		return
	}
	var skip []span
	if c.cfg.commitMetadata && metadata != nil {
		skip = decodeMetadata(*metadata, offset)
	}
	p.assignedAt(offset, skip)
}

// revoked is the client's OnPartitionsRevoked.
func (c *Consumer) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	c.retire(ctx, cl, revoked, true)
}

// lost is the client's OnPartitionsLost: the partitions are gone already,
// so their handlers are cancelled at once and nothing is committed.
func (c *Consumer) lost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	c.retire(ctx, cl, lost, false)
}

// retire ends the assignment of tps: nothing more of them runs; with
// commit, the handlers running on them may finish within the revoke
// timeout and the partitions are committed; then the rest are cancelled.
// Their records queued in the Pool are dropped as it gets to them.
func (c *Consumer) retire(ctx context.Context, cl *kgo.Client, tps map[string][]int32, commit bool) {
	c.mu.Lock()
	var ps []*partition
	for topic, ids := range tps {
		for _, id := range ids {
			tp := topicPartition{topic, id}
			if p := c.owned[tp]; p != nil {
				delete(c.owned, tp)
				c.retired = append(c.retired, p)
				ps = append(ps, p)
			}
		}
	}
	c.mu.Unlock()
	if len(ps) == 0 {
		return
	}
	var waits []<-chan struct{}
	for _, p := range ps {
		drained, parked, paused := p.revoke()
		if drained != nil {
			waits = append(waits, drained)
		}
		if paused { // a later assignment must not begin paused
			cl.ResumeFetchPartitions(map[string][]int32{p.topic: {p.id}})
		}
		for _, d := range parked { // the Pool drops them
			if _, err := c.m.Resume(d); err != nil {
				c.report(fmt.Errorf("workleasekafka: resuming %s: %w", d, err))
			}
		}
	}
	c.ahead.drop(ps) // their next owner fetches them again
	if commit && len(waits) > 0 && c.cfg.revokeTimeout > 0 {
		t := time.NewTimer(c.cfg.revokeTimeout)
	wait:
		for _, w := range waits {
			select {
			case <-w:
			case <-t.C:
				break wait
			case <-ctx.Done():
				break wait
			}
		}
		t.Stop()
	}
	for _, p := range ps {
		p.cancelRunning(ErrRevoked)
	}
	if commit {
		c.commit(ctx, cl, ps)
	}
}

// publishLocked makes byPrefix name the partitions owned and retired.
// c.mu must be held.
func (c *Consumer) publishLocked() {
	m := make(map[string]*partition, len(c.owned)+len(c.retired))
	for _, p := range c.owned {
		m[p.prefix] = p
	}
	for _, p := range c.retired {
		m[p.prefix] = p
	}
	c.byPrefix.Store(&m)
}

// commitEvery commits the partitions owned, and forgets the domains that
// finished, every commit interval until the Consumer stops.
func (c *Consumer) commitEvery() {
	t := time.NewTicker(c.cfg.commitEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stopCtx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		ps := make([]*partition, 0, len(c.owned))
		for _, p := range c.owned {
			ps = append(ps, p)
		}
		c.mu.Unlock()
		c.commit(c.stopCtx, c.cl, ps)
		c.sweep()
	}
}

// commit commits each of ps at its commit point, if it moved: its lowest
// unfinished record, checked first. Failures are reported, and the next
// commit tries again.
func (c *Consumer) commit(ctx context.Context, cl *kgo.Client, ps []*partition) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if c.crashed.Load() {
		return
	}
	type point struct {
		p      *partition
		offset int64
		meta   string
	}
	var points []point
	offsets := map[string]map[int32]kgo.EpochOffset{}
	metas := map[topicPartition]string{}
	for _, p := range ps {
		offset, meta, ok, err := p.commitPoint(c.cfg.commitMetadata)
		if err != nil {
			c.report(err)
			continue
		}
		if !ok {
			continue
		}
		if f := c.cfg.commitCheck; f != nil {
			if err := f(p.topic, p.id, offset); err != nil {
				c.report(fmt.Errorf("%w: %s/%d at %d: %w", ErrCommitRefused, p.topic, p.id, offset, err))
				continue
			}
		}
		points = append(points, point{p, offset, meta})
		if offsets[p.topic] == nil {
			offsets[p.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[p.topic][p.id] = kgo.EpochOffset{Epoch: -1, Offset: offset}
		metas[topicPartition{p.topic, p.id}] = meta
	}
	if len(points) == 0 {
		return
	}
	if c.cfg.commitMetadata {
		ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
			for i := range req.Topics {
				t := &req.Topics[i]
				for j := range t.Partitions {
					if meta, ok := metas[topicPartition{t.Topic, t.Partitions[j].Partition}]; ok && meta != "" {
						t.Partitions[j].Metadata = &meta
					}
				}
			}
			return nil
		})
	}
	var reqErr error
	failed := map[topicPartition]error{}
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			reqErr = err
			return
		}
		for _, t := range resp.Topics {
			for _, pr := range t.Partitions {
				if perr := kerr.ErrorForCode(pr.ErrorCode); perr != nil {
					failed[topicPartition{t.Topic, pr.Partition}] = perr
				}
			}
		}
	})
	for _, pt := range points {
		err := reqErr
		if err == nil {
			err = failed[topicPartition{pt.p.topic, pt.p.id}]
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				c.report(fmt.Errorf("workleasekafka: committing %s/%d at %d: %w", pt.p.topic, pt.p.id, pt.offset, err))
			}
			continue
		}
		pt.p.committedAt(pt.offset, pt.meta)
		c.commits.Add(1)
	}
}

// sweep forgets the domains whose records all finished, so that the
// Manager's memory holds only the keys at work, and lets go of the retired
// partitions that have drained.
func (c *Consumer) sweep() {
	c.mu.Lock()
	ps := make([]*partition, 0, len(c.owned)+len(c.retired))
	for _, p := range c.owned {
		ps = append(ps, p)
	}
	ps = append(ps, c.retired...)
	c.mu.Unlock()
	var forgotten, busy []string
	for _, p := range ps {
		forgotten, busy = forgotten[:0], busy[:0]
		for _, d := range p.sweep() {
			err := c.m.Forget(d)
			switch {
			case err == nil:
				forgotten = append(forgotten, d)
			case errors.Is(err, worklease.ErrDomainBusy): // more queued, or its lease not ended yet
				busy = append(busy, d)
			default:
				c.report(fmt.Errorf("workleasekafka: forgetting %s: %w", d, err))
			}
		}
		p.forget(forgotten)
		p.touch(busy)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.retired)
	c.retired = slices.DeleteFunc(c.retired, (*partition).drainedAll)
	if len(c.retired) != n {
		c.publishLocked()
	}
}

// report tells the error func, if any, about err.
func (c *Consumer) report(err error) {
	if f := c.cfg.errorFunc; f != nil {
		f(err)
	}
}

// Stats are a Consumer's counts: what it holds now, and what it did since
// New. Each count is read on its own, so counts that change together may
// be read a moment apart.
type Stats struct {
	Partitions int  // partitions assigned now
	Unfinished int  // records of those partitions handed to the handlers and not finished
	Throttled  bool // handing over is held back: the handlers have WithMaxUnfinished records
	Paused     int  // partitions whose fetching is paused for holding half of them
	Parked     int  // records parked (see WithParkOnFailure)
	// Ahead counts the records polled ahead of the handlers: fetched, and
	// not handed to them yet (not in Unfinished). AheadPaused counts
	// those of them set aside while their partition is paused.
	Ahead, AheadPaused int

	Handled      uint64 // records the handler finished
	Retried      uint64 // failed attempts, to be tried again
	DeadLettered uint64 // records given up on: produced to the dead-letter topic, or dropped without one
	Panicked     uint64 // attempts whose handler panicked (also counted as failed)
	Skipped      uint64 // records not run because their commit's metadata said they were finished
	Commits      uint64 // partitions committed
}

// Stats returns the Consumer's counts.
func (c *Consumer) Stats() Stats {
	s := Stats{
		Handled: c.handled.Load(), Retried: c.retried.Load(), DeadLettered: c.deadLettered.Load(),
		Panicked: c.panicked.Load(), Skipped: c.skipped.Load(), Commits: c.commits.Load(),
	}
	c.mu.Lock()
	ps := make([]*partition, 0, len(c.owned))
	for _, p := range c.owned {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	s.Partitions = len(ps)
	s.Throttled = c.budget.waiting.Load()
	s.Ahead, s.AheadPaused = c.ahead.held()
	for _, p := range ps {
		p.mu.Lock()
		s.Unfinished += p.unfinished
		s.Parked += len(p.parked)
		if p.paused {
			s.Paused++
		}
		p.mu.Unlock()
	}
	return s
}
