package workleasekafka

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// The headers a dead letter carries besides the record's own (see
// WithDeadLetterTopic).
const (
	HeaderCause     = "worklease.cause"     // the last attempt's error, cut to worklease.MaxCauseLen bytes
	HeaderAttempts  = "worklease.attempts"  // the attempts made, in decimal
	HeaderTopic     = "worklease.topic"     // the record's topic
	HeaderPartition = "worklease.partition" // the record's partition, in decimal
	HeaderOffset    = "worklease.offset"    // the record's offset, in decimal
)

// domain returns the domain of key's records in p: p's prefix and the key,
// or the key's SHA-256 for a key too long for a domain.
func (c *Consumer) domain(p *partition, key string) string {
	return string(nameOf([]byte(p.prefix), p, key))
}

// name returns the name in p of the domain of r, whose key WithKeyFunc
// gives (see nameOf).
func (c *Consumer) name(p *partition, r *kgo.Record) string {
	key := c.cfg.keyFunc(r)
	if len(p.prefix)+len(key) > worklease.MaxDomainLen {
		return string(nameOf(nil, p, key))
	}
	return key
}

// partitionOf returns the partition of a domain's records, or nil if it is
// gone.
func (c *Consumer) partitionOf(domain string) *partition {
	// The prefix ends at the third '/': a topic's name has none.
	end := 0
	for range 3 {
		i := strings.IndexByte(domain[end:], '/')
		if i < 0 {
			return nil
		}
		end += i + 1
	}
	return (*c.byPrefix.Load())[domain[:end]]
}

// handleJob is the Pool's handler: one attempt at a batch of a key's
// records (see partition), which runs them in order, each with attempts of
// its own. A record that fails ends the attempt: the Pool tries the batch
// again after its backoff, from that record.
//
// The handlers run with their partition's context rather than the job's:
// the Pool cancels a job's context only when it stops without waiting, or
// when the job's lease is lost, which the Consumer's Manager, whose leases
// never expire, never has; the Consumer cancels every partition's context
// when it stops so, and a partition's when it is revoked.
func (c *Consumer) handleJob(_ context.Context, job worker.Job) error {
	p := c.partitionOf(job.Domain)
	if p == nil {
		return nil // its partition's records were all dropped
	}
	d, lead := job.Domain, job.Offset
	// The batch's tasks are on the stack: writing their records there
	// costs no write barriers, and nothing is left to clear, as a pooled
	// buffer's would be, so that it keeps no records.
	var buf [maxBatch]task
	hctx, tasks := p.start(c.handlerCtx, d, lead, buf[:0])
	if len(tasks) == 0 {
		return nil // dropped with its partition, or finished already
	}
	ran, err := c.run(hctx, p, d, job.Token, tasks)
	stopped := ran < len(tasks)
	dropped, resume := p.finish(d, lead, tasks, ran, stopped, stopped && err != errNotStarted)
	if resume {
		c.resumeFetch(p)
	}
	switch {
	case dropped:
		return nil
	case err == errNotStarted:
		return ErrStopped
	}
	return err
}

// errNotStarted says that a batch stopped before a record, as its
// partition was revoked or the Consumer is closing.
var errNotStarted = errors.New("workleasekafka: batch stopped")

// run runs tasks in order and returns how many finished, and, if it
// stopped before the end, why.
func (c *Consumer) run(ctx context.Context, p *partition, domain string, tok worklease.Token, tasks []task) (_ int, err error) {
	handled := 0
	defer func() { c.handled.Add(uint64(handled)) }()
	// The attempts' contexts, made in one allocation: each attempt has its
	// own, never reused, as a handler may keep its context. They share the
	// batch's context and attempt number (see attemptContext).
	actxs := make([]attemptContext, len(tasks))
	var first *attemptBase
	for i := range tasks {
		t := &tasks[i]
		if i > 0 {
			if p.isRevoked() || c.stopped.Load() {
				return i, errNotStarted // the records left go to the next owner, or the next run
			}
		}
		if f := t.givenUp; f != nil {
			if err := c.giveUp(ctx, t.rec, f.cause, f.failed); err != nil {
				return i, err
			}
			continue
		}
		if first == nil || first.attempt != t.attempt {
			first = &attemptBase{Context: ctx, attempt: t.attempt}
		}
		actx := &actxs[i]
		*actx = attemptContext{attemptBase: first, rec: t.rec}
		if len(c.cfg.middleware) == 0 {
			err = c.handle(actx, t.rec)
		} else {
			err = c.runChain(actx, worker.Job{Domain: domain, Offset: t.offset, Attempt: t.attempt, Token: tok})
		}
		if err == nil {
			handled++
			continue
		}
		if err := c.failed(ctx, p, domain, *t, err); err != nil {
			return i, err
		}
	}
	return len(tasks), nil
}

// failed sees to a record whose attempt failed with err: it returns err
// if the record is to be tried again, after the Pool's backoff (or not at
// all, if its partition is gone), or if it parked its key; and nil if the
// record was given up on, and its batch goes on.
func (c *Consumer) failed(ctx context.Context, p *partition, domain string, t task, err error) error {
	switch {
	case ctx.Err() != nil || p.isRevoked():
		// Cancelled, or its partition is gone: neither a failure of the
		// record nor a reason to give up on it. The Pool tries it again;
		// if its partition is gone, that drops it.
		return err
	case t.attempt <= c.cfg.maxRetries:
		c.retried.Add(1)
		return err
	case c.cfg.park:
		// Paused while this attempt holds the lease: the Pool's retry puts
		// the batch back at the front of its line, where it waits. The
		// domain is paused before the record is marked parked, so that a
		// Resume, which needs the mark, comes after the pause; a
		// revocation that came first resumes nothing, and so here.
		if perr := c.m.Pause(domain); perr != nil {
			c.report(fmt.Errorf("workleasekafka: parking %s: %w", domain, perr))
			return err
		}
		if !p.park(domain, t.offset, c.keyOf(t.rec), err, t.attempt) {
			if _, rerr := c.m.Resume(domain); rerr != nil {
				c.report(fmt.Errorf("workleasekafka: resuming %s: %w", domain, rerr))
			}
		}
		return err
	}
	if gerr := c.giveUp(ctx, t.rec, err, t.attempt); gerr != nil {
		p.giveUp(t.offset, err, t.attempt)
		return gerr
	}
	return nil
}

// runChain runs the middleware and the handler, recovering a panic of a
// middleware as a failed attempt (the handler's own is recovered by call).
func (c *Consumer) runChain(ctx context.Context, job worker.Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			c.panicked.Add(1)
			err = &worker.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return c.chain(ctx, job)
}

// call is the innermost handler of the chain: it runs the Consumer's
// handler on the record ctx carries.
func (c *Consumer) call(ctx context.Context, _ worker.Job) error {
	r := RecordFromContext(ctx)
	if r == nil {
		return errors.New("workleasekafka: a middleware dropped the record from the context")
	}
	return c.handle(ctx, r)
}

// handle runs the Consumer's handler on r, with ctx, recovering a panic as
// a failed attempt.
func (c *Consumer) handle(ctx context.Context, r *kgo.Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			c.panicked.Add(1)
			err = &worker.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return c.h(ctx, r)
}

// giveUp gives up on r, which failed with cause after attempts: it produces
// its dead letter if there is a dead-letter topic, and reports it
// otherwise. It returns the produce's error if that failed, and the record
// is then unfinished.
func (c *Consumer) giveUp(ctx context.Context, r *kgo.Record, cause error, attempts int) error {
	if c.cfg.deadLetter == "" {
		c.deadLettered.Add(1)
		c.report(fmt.Errorf("workleasekafka: %s/%d offset %d given up after %d attempts: %w", r.Topic, r.Partition, r.Offset, attempts, cause))
		return nil
	}
	dl := deadLetter(c.cfg.deadLetter, r, cause, attempts)
	if err := c.cl.ProduceSync(ctx, dl).FirstErr(); err != nil {
		err = fmt.Errorf("workleasekafka: producing the dead letter of %s/%d offset %d: %w", r.Topic, r.Partition, r.Offset, err)
		c.report(err)
		return err
	}
	c.deadLettered.Add(1)
	return nil
}

// deadLetter returns the dead letter of r, which failed with cause after
// attempts, for topic.
func deadLetter(topic string, r *kgo.Record, cause error, attempts int) *kgo.Record {
	msg := "<nil>"
	if cause != nil {
		msg = cutText(cause.Error(), worklease.MaxCauseLen)
	}
	headers := make([]kgo.RecordHeader, 0, len(r.Headers)+5)
	headers = append(headers, r.Headers...)
	headers = append(headers,
		kgo.RecordHeader{Key: HeaderCause, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
	)
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: headers}
}

// cutText returns s cut to at most n bytes at a UTF-8 boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// An attemptContext is a handler's context: the attempt's, carrying the
// record, and the batch's context and the attempt's number in an
// attemptBase, which the batch's attempts of the same number share. So an
// attempt costs two words: a batch's records are mostly on their first
// attempt (only the record a retried batch goes on from is not), and share
// one attemptBase.
type attemptContext struct {
	*attemptBase
	rec *kgo.Record
}

// An attemptBase is what the attempts of a batch share: their context,
// and their attempt's number.
type attemptBase struct {
	context.Context
	attempt int
}

type attemptKey struct{}

func (c *attemptContext) Value(key any) any {
	if key == (attemptKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// RecordFromContext returns the record a handler's context, or a
// middleware's (see WithMiddleware), was made for, or nil if ctx is no
// such context.
func RecordFromContext(ctx context.Context) *kgo.Record {
	if a, ok := ctx.Value(attemptKey{}).(*attemptContext); ok {
		return a.rec
	}
	return nil
}

// AttemptFromContext returns the number of the attempt a handler's context
// was made for: 1 for the first attempt at the record, and one more after
// each failed one (counted afresh after Resume). It returns 0 if ctx is no
// such context.
func AttemptFromContext(ctx context.Context) int {
	if a, ok := ctx.Value(attemptKey{}).(*attemptContext); ok {
		return a.attempt
	}
	return 0
}

// A HeaderCarrier reads and writes the headers of a record as text, for
// trace context propagation: it has the methods of OpenTelemetry's
// propagation.TextMapCarrier (Get, Set and Keys), so that a propagator can
// extract the trace context a producer injected into a record's headers,
// without this module depending on OpenTelemetry. The workleaseotel
// module's WithCarrier takes one, to link each attempt's span to the
// producer's.
type HeaderCarrier struct {
	r *kgo.Record
}

// NewHeaderCarrier returns a HeaderCarrier of r's headers; r may be nil,
// for a carrier with none.
func NewHeaderCarrier(r *kgo.Record) HeaderCarrier { return HeaderCarrier{r} }

// Get returns the value of the last header named key, or "".
func (h HeaderCarrier) Get(key string) string {
	if h.r == nil {
		return ""
	}
	for i := len(h.r.Headers) - 1; i >= 0; i-- {
		if h.r.Headers[i].Key == key {
			return string(h.r.Headers[i].Value)
		}
	}
	return ""
}

// Set replaces the headers named key with one of value. It does nothing
// without a record.
func (h HeaderCarrier) Set(key, value string) {
	if h.r == nil {
		return
	}
	h.r.Headers = append(slicesDeleteHeader(h.r.Headers, key), kgo.RecordHeader{Key: key, Value: []byte(value)})
}

func slicesDeleteHeader(hs []kgo.RecordHeader, key string) []kgo.RecordHeader {
	out := hs[:0]
	for _, hd := range hs {
		if hd.Key != key {
			out = append(out, hd)
		}
	}
	return out
}

// Keys returns the names of the headers, each once.
func (h HeaderCarrier) Keys() []string {
	if h.r == nil {
		return nil
	}
	keys := make([]string, 0, len(h.r.Headers))
	seen := make(map[string]bool, len(h.r.Headers))
	for _, hd := range h.r.Headers {
		if !seen[hd.Key] {
			seen[hd.Key] = true
			keys = append(keys, hd.Key)
		}
	}
	return keys
}

// A ParkedRecord is a record whose failure parked its key (see
// WithParkOnFailure).
type ParkedRecord struct {
	Topic     string
	Partition int32
	Key       string // as WithKeyFunc gives it
	Offset    int64
	Attempts  int   // attempts made since it was fetched or last resumed
	Cause     error // the last attempt's error
}

// Parked returns the records parked in the partitions the Consumer owns,
// in no particular order.
func (c *Consumer) Parked() []ParkedRecord {
	c.mu.Lock()
	ps := make([]*partition, 0, len(c.owned))
	for _, p := range c.owned {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	var out []ParkedRecord
	for _, p := range ps {
		p.mu.Lock()
		for _, pk := range p.parked {
			f := p.failures[pk.offset]
			out = append(out, ParkedRecord{Topic: p.topic, Partition: p.id, Key: pk.key, Offset: pk.offset, Attempts: f.failed, Cause: f.cause})
		}
		p.mu.Unlock()
	}
	return out
}

// Resume ends the parking of key in partition of topic: its parked record
// runs again, with its attempts counted afresh, then the key's later
// records. It returns an error matching ErrNotParked if the Consumer owns
// no such partition or the key has no record parked there.
func (c *Consumer) Resume(topic string, partition int32, key string) error {
	return c.unpark("Resume", topic, partition, key, false)
}

// Skip ends the parking of key in partition of topic by giving up on its
// parked record: it goes to the dead-letter topic if there is one (see
// WithDeadLetterTopic) and is dropped otherwise, and the key's later
// records run. It returns an error matching ErrNotParked if the Consumer
// owns no such partition or the key has no record parked there.
func (c *Consumer) Skip(topic string, partition int32, key string) error {
	return c.unpark("Skip", topic, partition, key, true)
}

func (c *Consumer) unpark(op, topic string, partition int32, key string, skip bool) error {
	c.mu.Lock()
	p := c.owned[topicPartition{topic, partition}]
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("workleasekafka: %s: %s/%d %q: %w", op, topic, partition, key, ErrNotParked)
	}
	d := c.domain(p, key)
	if !p.unpark(d, skip) {
		return fmt.Errorf("workleasekafka: %s: %s/%d %q: %w", op, topic, partition, key, ErrNotParked)
	}
	if _, err := c.m.Resume(d); err != nil {
		return fmt.Errorf("workleasekafka: %s: %s/%d %q: %w", op, topic, partition, key, err)
	}
	return nil
}
