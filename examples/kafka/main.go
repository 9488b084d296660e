// Command kafka consumes a Kafka topic through a worklease worker pool: the
// records of each key are handled one at a time, in order, while records of
// different keys run in parallel, with many more workers than the topic has
// partitions. A plain consumer handles a partition's records one after the
// other, so its parallelism is the number of partitions.
//
// The record's key is the domain and its Kafka offset the offset. Kafka
// sends each key to one partition, where offsets only grow, so a domain's
// offsets grow too: the Manager runs WithMonotonicOffsets, which keeps
// constant memory per key and answers AlreadyProcessed to a record below
// one it finished, such as a record polled again after a restart.
//
// Records finish out of order, so the consumer commits each partition only
// up to its lowest unfinished record (see tracker), as Confluent's Parallel
// Consumer does: should the process crash, the records below the last
// commit are finished, and those above it are polled again. The pool's observer tells the
// tracker when a record is finished: processed, or dead-lettered after its
// retries. A handler that fails is retried by the pool with backoff, still
// before any later record of its key.
//
// By default the program starts an in-process Kafka cluster (kfake) and a
// producer that writes -records records over -keys keys while the consumer
// runs, so it needs nothing else; -brokers points it at a real cluster,
// where it writes to -topic (created with -partitions if it does not
// exist) and consumes from where the topic ended before the run. It prints
// its progress every second, and checks its work while it runs and at the
// end (see checker): every key's records were handled once each, in the
// order they were produced; no commit passed an unfinished record; and every
// partition was committed to its end. The exit status is 0 if all of that
// holds, 1 if anything went wrong, and 2 for a usage error.
//
//	cd examples/kafka && go run .
//	go run . -records 200000 -workers 256 -fail 0.1 -work 2ms
//	go run . -brokers localhost:9092 -topic worklease-example
//
// # Rebalances
//
// The example runs one consumer, which keeps every partition for the whole
// run. In a group of several, a partition moves when the group rebalances,
// and the consumer losing it must hand it over in kgo's OnPartitionsRevoked
// (with BlockRebalanceOnPoll, so that no poll is under way): stop submitting
// the partition's records; wait, within the rebalance timeout, for those
// submitted to finish; commit the partition at its lowest unfinished record
// with CommitOffsetsSync; and stop tracking it. The new owner starts at that
// commit, so a record still unfinished is handled there, and should not run
// here as well: with the in-memory Manager, which is this process's alone,
// the handler skips the records of partitions the consumer no longer owns.
// A backend the whole group shares (the pg module) keeps one lease per key
// across the processes, and answers AlreadyProcessed to the new owner for
// the records finished here. In OnPartitionsLost the partition is gone
// already: commit nothing, and drop it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain is main with its arguments, output and exit status made explicit,
// so that tests can run it.
func realMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sum, err := run(ctx, cfg, stdout)
	sum.print(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "kafka: FAILED: %v\n", err)
		return 1
	}
	return 0
}

// config is what a run does; the flags set it.
type config struct {
	Brokers    []string // empty: start an in-process cluster
	Topic      string
	Partitions int // for a topic that does not exist yet
	Keys       int
	Records    int
	Workers    int
	QueueLimit int           // records submitted and not started, at most
	FailRate   float64       // chance that one attempt fails
	MaxRetries int           // passed to worklease.WithMaxRetries
	Work       time.Duration // how long the handler works on one attempt
	Seed       uint64        // picks the keys and the failures; 0 picks one at random
	Backoff    worklease.Backoff
	Commit     time.Duration // how often to commit
	Progress   time.Duration // how often to print progress and check for stalls
	Stall      time.Duration // the run fails after this long without a record finishing
	Quiet      bool          // print only the summary
}

// defaultConfig is tuned so that a run takes a few seconds on two cores.
func defaultConfig() config {
	return config{
		Topic:      "worklease-example",
		Partitions: 4,
		Keys:       1000,
		Records:    50_000,
		Workers:    64,
		QueueLimit: 10_000,
		FailRate:   0.03,
		MaxRetries: worklease.DefaultMaxRetries,
		Work:       time.Millisecond,
		Backoff:    worklease.Backoff{Base: time.Millisecond, Max: 50 * time.Millisecond},
		Commit:     100 * time.Millisecond,
		Progress:   time.Second,
		Stall:      30 * time.Second,
	}
}

func (c config) validate() error {
	switch {
	case c.Topic == "":
		return errors.New("-topic must not be empty")
	case c.Partitions < 1 || c.Partitions > 10_000:
		return errors.New("-partitions must be between 1 and 10000")
	case c.Keys < 1 || c.Keys > 1_000_000:
		return errors.New("-keys must be between 1 and 1000000")
	case c.Records < 1 || c.Records > 10_000_000:
		return errors.New("-records must be between 1 and 10000000")
	case c.Workers < 1 || c.Workers > 10_000:
		return errors.New("-workers must be between 1 and 10000")
	case c.QueueLimit < 1:
		return errors.New("-queue must be at least 1")
	case !(c.FailRate >= 0 && c.FailRate <= 1): // written so that NaN fails too
		return errors.New("-fail must be between 0 and 1")
	case c.MaxRetries < 0 || c.MaxRetries > 30:
		return errors.New("-max-retries must be between 0 and 30")
	case c.Work < 0 || c.Work > time.Minute:
		return errors.New("-work must be between 0 and 1m")
	case c.Commit <= 0 || c.Progress <= 0 || c.Stall <= 0:
		return errors.New("commit, progress and stall intervals must be positive")
	}
	return nil
}

// parseFlags parses args into a config. It reports errors and usage on
// stderr and returns flag.ErrHelp for -h.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("kafka", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: go run . [flags]   (in examples/kafka)\n\n"+
			"Produces records to a Kafka topic and consumes them through a worklease\n"+
			"worker pool, in order per key, committing each partition below its lowest\n"+
			"unfinished record, and checks the outcome. Flags:\n\n")
		fs.PrintDefaults()
	}
	var brokers string
	fs.StringVar(&brokers, "brokers", "", "comma-separated Kafka brokers (default: start an in-process cluster)")
	fs.StringVar(&cfg.Topic, "topic", cfg.Topic, "topic to produce to and consume")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the topic, if it is created")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "number of keys (the domains)")
	fs.IntVar(&cfg.Records, "records", cfg.Records, "number of records to produce and consume")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "number of workers in the pool")
	fs.IntVar(&cfg.QueueLimit, "queue", cfg.QueueLimit, "records submitted and not yet started, at most; polling waits beyond")
	fs.Float64Var(&cfg.FailRate, "fail", cfg.FailRate, "probability that one attempt of the handler fails")
	fs.IntVar(&cfg.MaxRetries, "max-retries", cfg.MaxRetries, "retries of a record before it is dead-lettered")
	fs.DurationVar(&cfg.Work, "work", cfg.Work, "how long the handler works on one attempt")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "picks the keys and the failing attempts (0: random)")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "print only the summary")
	if err := fs.Parse(args); err != nil {
		return cfg, err // fs has reported it, with the usage
	}
	if brokers != "" {
		cfg.Brokers = strings.Split(brokers, ",")
	}
	err := cfg.validate()
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(stderr, "kafka:", err)
		fs.Usage()
	}
	return cfg, err
}

// summary is the outcome of a run.
type summary struct {
	Cluster    string // where the topic lives
	Partitions int    // the topic's

	Produced, Polled, Redelivered int64
	Processed, DeadLettered       int64 // by the backend's events
	Retries                       int64 // EventRetrying: failed attempts retried
	Stray                         int64 // terminal events of records not tracked as unfinished
	Elapsed                       time.Duration

	Checked bool    // the end-of-run check ran
	Outcome outcome // what it found
	// Verified: the check found nothing wrong, and the backend's events
	// agree with it.
	Verified bool
}

// print writes the summary's lines.
func (s *summary) print(w io.Writer) {
	if s.Cluster == "" {
		return // the run did not start
	}
	fmt.Fprintf(w, "kafka: done in %v: %d records produced, %d processed, %d dead-lettered, %d retries, %d commits\n",
		s.Elapsed.Round(time.Millisecond), s.Produced, s.Processed, s.DeadLettered, s.Retries, s.Outcome.Commits)
	if s.Redelivered > 0 {
		fmt.Fprintf(w, "%d records polled again after a rebalance, and skipped\n", s.Redelivered)
	}
	if !s.Checked {
		fmt.Fprintln(w, "not verified: the run did not finish")
		return
	}
	yes := map[bool]string{true: "yes", false: "NO"}
	o := s.Outcome
	fmt.Fprintf(w, "per-key order        verified: %s (%d keys; every record handled once, in the order produced)\n",
		yes[o.OrderViolations == 0], o.Keys)
	fmt.Fprintf(w, "commits              verified: %s (none of %d past an unfinished record; every partition committed to its end)\n",
		yes[o.CommitViolations == 0], o.Commits)
	for _, v := range o.Violations {
		fmt.Fprintln(w, "  violation:", v)
	}
	if more := o.OrderViolations + o.CommitViolations - len(o.Violations); more > 0 {
		fmt.Fprintf(w, "  and %d more violations\n", more)
	}
	if s.Stray > 0 {
		fmt.Fprintf(w, "  %d events finished records that were not unfinished\n", s.Stray)
	}
	if !s.Verified && o.OrderViolations+o.CommitViolations == 0 {
		fmt.Fprintf(w, "  the backend's events (%d processed, %d dead-lettered, %d retries) disagree with the handler's (%d, %d, %d)\n",
			s.Processed, s.DeadLettered, s.Retries, o.Processed, o.DeadLettered, o.Retries)
	}
}

// consumer is one run's consumer and the parts it drives.
type consumer struct {
	cfg   config
	cl    *kgo.Client // the group consumer
	pool  *worker.Pool
	tr    *tracker
	chk   *checker
	fails failer

	starts map[int32]int64 // where the run's records begin in each partition

	polled, redelivered, stray       atomic.Int64
	processed, deadLettered, retries atomic.Int64

	commitMu  sync.Mutex      // guards committed; held while a commit is sent
	committed map[int32]int64 // the last offset committed for each partition
}

// run produces and consumes cfg.Records records and checks the outcome. Its
// summary holds what was done when it returns, with or without an error.
func run(ctx context.Context, cfg config, out io.Writer) (sum summary, err error) {
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	// A group of its own: it starts where the run's records do, and its
	// commits are the run's alone.
	group := cfg.Topic + "-" + strconv.FormatUint(rand.Uint64(), 36)
	if cfg.Quiet {
		out = io.Discard
	}
	sum = summary{Cluster: strings.Join(cfg.Brokers, ",")}
	start := time.Now()
	defer func() { sum.Elapsed = time.Since(start) }()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	brokers := cfg.Brokers
	if len(brokers) == 0 {
		var stop func()
		if brokers, stop, err = startCluster(); err != nil {
			return sum, err
		}
		defer stop()
		sum.Cluster = "in-process cluster"
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return sum, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	starts, err := prepareTopic(ctx, adm, cfg.Topic, cfg.Partitions)
	if err != nil {
		return sum, err
	}
	sum.Partitions = len(starts)
	// The group starts where the topic ends now, so that it consumes this
	// run's records and nothing older.
	if err := startGroupAt(ctx, adm, group, cfg.Topic, starts); err != nil {
		return sum, err
	}
	fmt.Fprintf(out, "kafka: %d records over %d keys, topic %q (%d partitions, %s), group %q, %d workers, %.3g%% of attempts failing\n",
		cfg.Records, cfg.Keys, cfg.Topic, len(starts), sum.Cluster, group, cfg.Workers, 100*cfg.FailRate)

	c := &consumer{
		cfg: cfg, tr: newTracker(), chk: newChecker(cfg.MaxRetries),
		fails: failer{rate: cfg.FailRate, seed: cfg.Seed}, starts: starts,
	}
	c.committed = make(map[int32]int64, len(starts))
	for p, o := range starts {
		c.committed[p] = o
	}
	m, err := worklease.New(
		worklease.WithMonotonicOffsets(),
		worklease.WithMaxRetries(cfg.MaxRetries),
		worklease.WithObserver(worklease.ObserverFunc(c.observe)),
	)
	if err != nil {
		return sum, err
	}
	defer m.Close()
	c.pool, err = worker.New(m.Backend(), c.handle,
		worker.WithWorkers(cfg.Workers),
		worker.WithQueueLimit(cfg.QueueLimit),
		worker.WithBackoff(cfg.Backoff),
	)
	if err != nil {
		return sum, err
	}
	// Autocommit is off: the consumer commits what the tracker allows.
	c.cl, err = kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		return sum, err
	}
	defer c.cl.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(cfg.Topic))
	if err != nil {
		return sum, err
	}
	defer producer.Close()

	var (
		wg       sync.WaitGroup
		produced atomic.Int64
		endsCh   = make(chan map[int32]int64, 1)
		poolDone = make(chan error, 1)
	)
	defer wg.Wait()
	defer cancel(nil) // before wg.Wait: the goroutines stop
	go func() { poolDone <- c.pool.Run(ctx) }()
	wg.Go(func() { // the producer
		if err := produce(ctx, producer, cfg.Records, cfg.Keys, cfg.Seed, c.chk, &produced); err != nil {
			cancel(err)
			return
		}
		ends, err := endOffsets(ctx, adm, cfg.Topic)
		if err != nil {
			cancel(err)
			return
		}
		endsCh <- ends
	})
	wg.Go(func() { c.commitEvery(ctx, cancel) })
	wg.Go(func() { c.report(ctx, cancel, out, start, &produced) })

	ends, err := c.consume(ctx, starts, endsCh)
	if err == nil {
		err = c.drain(ctx)
	}
	if err == nil {
		err = c.commit(ctx) // the last records' commit
	}
	stopErr := c.pool.Stop(context.WithoutCancel(ctx))
	cancel(nil)
	if perr := <-poolDone; err == nil && perr != nil && !errors.Is(perr, context.Canceled) {
		err = perr
	}
	if err == nil {
		err = stopErr
	}
	sum.Produced, sum.Polled, sum.Redelivered = produced.Load(), c.polled.Load(), c.redelivered.Load()
	sum.Processed, sum.DeadLettered, sum.Retries = c.processed.Load(), c.deadLettered.Load(), c.retries.Load()
	sum.Stray = c.stray.Load()
	if err != nil {
		return sum, err
	}

	c.cl.Close() // leaves the group
	fetchCtx, cancelFetch := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelFetch()
	committed, err := committedOffsets(fetchCtx, adm, group, cfg.Topic)
	if err != nil {
		return sum, err
	}
	sum.Checked, sum.Outcome = true, c.chk.finish(starts, ends, committed)
	o := sum.Outcome
	sum.Verified = o.OrderViolations+o.CommitViolations == 0 && sum.Stray == 0 &&
		int64(o.Records) == sum.Produced && int64(o.Processed) == sum.Processed &&
		int64(o.DeadLettered) == sum.DeadLettered && int64(o.Retries) == sum.Retries
	if !sum.Verified {
		return sum, errors.New("the check failed")
	}
	return sum, nil
}

// consume polls records and submits them to the pool until every partition
// is polled to its end, which endsCh says once the producer is done. It
// returns the ends.
func (c *consumer) consume(ctx context.Context, starts map[int32]int64, endsCh <-chan map[int32]int64) (map[int32]int64, error) {
	var ends map[int32]int64
	for {
		if ends == nil {
			select {
			case ends = <-endsCh:
			default:
			}
		}
		if ends != nil && polledAll(c.tr.polledTo(), starts, ends) {
			return ends, nil
		}
		// A short poll, so that the loop sees the ends arrive.
		pollCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fetches := c.cl.PollRecords(pollCtx, 1000)
		cancel()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("polling partition %d: %w", fe.Partition, fe.Err)
			}
		}
		for r := range fetches.RecordsAll() {
			if err := c.submit(ctx, r); err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx) // why Submit gave up waiting
				}
				return nil, err
			}
		}
	}
}

// polledAll reports whether every partition with records has been polled
// to its end.
func polledAll(polled, starts, ends map[int32]int64) bool {
	for p, end := range ends {
		if end > starts[p] && polled[p] < end {
			return false
		}
	}
	return true
}

// submit hands r to the pool, its key as the domain and its offset as the
// offset, after the tracker has it as unfinished. Submit waits while the
// pool's queue is full, which holds back polling.
func (c *consumer) submit(ctx context.Context, r *kgo.Record) error {
	key := string(r.Key)
	fresh, err := c.tr.add(key, r.Partition, r.Offset)
	if err != nil || !fresh {
		if !fresh {
			c.redelivered.Add(1)
		}
		return err
	}
	c.chk.polled(key, r.Partition, r.Offset)
	c.polled.Add(1)
	st, err := c.pool.Submit(ctx, key, r.Offset, r.Value)
	if err != nil {
		return fmt.Errorf("submitting %s/%d: %w", key, r.Offset, err)
	}
	if st == worklease.AlreadyProcessed || st == worklease.AlreadyFailed {
		// Finished before: no event will say so.
		c.tr.finish(key, r.Offset)
	}
	return nil
}

// drain waits until no polled record is unfinished.
func (c *consumer) drain(ctx context.Context) error {
	for {
		n, idle := c.tr.pending()
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// handle is the pool's handler: it works on one attempt at one record, and
// fails it at random.
func (c *consumer) handle(ctx context.Context, job worker.Job) error {
	key, seq, ok := parseValue(job.Payload)
	if !ok || key != job.Domain {
		c.chk.foreign(job.Domain, job.Offset, job.Payload)
		return nil
	}
	c.chk.begin(key)
	err := sleep(ctx, c.cfg.Work)
	if err == nil && c.fails.fails(key, seq, job.Attempt) {
		err = errInjected
	}
	// The check learns the outcome before the pool does, and so before the
	// tracker: it is never behind a commit.
	c.chk.end(key, job.Offset, seq, job.Attempt, err == nil)
	return err
}

var errInjected = errors.New("injected failure")

// sleep waits for d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// observe is the backend's observer: it finishes a record in the tracker
// when the record is terminal, and counts outcomes.
func (c *consumer) observe(e worklease.Event) {
	switch e.Kind {
	case worklease.EventProcessed:
		c.processed.Add(1)
	case worklease.EventDeadLettered:
		c.deadLettered.Add(1)
	case worklease.EventRetrying:
		c.retries.Add(1)
		return
	default:
		return
	}
	if !c.tr.finish(e.Domain, e.Offset) {
		c.stray.Add(1)
	}
}

// commitEvery commits every cfg.Commit until ctx is done, and cancels the
// run if a commit fails.
func (c *consumer) commitEvery(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(c.cfg.Commit)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.commit(ctx); err != nil {
				cancel(err)
				return
			}
		}
	}
}

// commit commits each partition that moved at the tracker's offset for it:
// its lowest unfinished record, or past its last polled record. The checker
// sees each offset first, and a commit it refuses is not sent.
func (c *consumer) commit(ctx context.Context) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	batch := map[int32]kgo.EpochOffset{}
	for p, o := range c.tr.commitOffsets() {
		if o <= c.committed[p] {
			continue
		}
		if err := c.chk.commit(p, o); err != nil {
			return err
		}
		batch[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	if len(batch) == 0 {
		return nil
	}
	var err error
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.cfg.Topic: batch},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, cerr error) {
			if err = cerr; err != nil {
				return // resp may be nil
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil && err == nil {
						err = fmt.Errorf("partition %d: %w", p.Partition, perr)
					}
				}
			}
		})
	if err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	for p, eo := range batch {
		c.committed[p] = eo.Offset
	}
	return nil
}

// committedRecords returns how many offsets the commits have moved past.
func (c *consumer) committedRecords() int64 {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	var n int64
	for p, o := range c.committed {
		n += o - c.starts[p]
	}
	return n
}

// report prints progress every cfg.Progress until ctx is done, and cancels
// the run if no record finished for cfg.Stall while some were unfinished.
func (c *consumer) report(ctx context.Context, cancel context.CancelCauseFunc, out io.Writer, start time.Time, produced *atomic.Int64) {
	t := time.NewTicker(c.cfg.Progress)
	defer t.Stop()
	lastDone, lastMove := int64(-1), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		done := c.processed.Load() + c.deadLettered.Load()
		st := c.pool.Stats()
		fmt.Fprintf(out, "%6.1fs  produced %d  polled %d  finished %d  in flight %d  queued %d  retries %d  committed %d\n",
			time.Since(start).Seconds(), produced.Load(), c.polled.Load(), done, st.InFlight, st.Queued,
			c.retries.Load(), c.committedRecords())
		if pending, _ := c.tr.pending(); done != lastDone || pending == 0 {
			lastDone, lastMove = done, time.Now()
		} else if time.Since(lastMove) > c.cfg.Stall {
			cancel(fmt.Errorf("no record finished for %v, %d unfinished: %s", c.cfg.Stall, pending, c.tr.describe()))
			return
		}
	}
}

// keysOf returns m's keys, sorted.
func keysOf[V any](m map[int32]V) []int32 {
	ks := make([]int32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
