// Command kafka consumes a Kafka topic with the workleasekafka module: the
// records of each key are handled one at a time, in order, while records of
// different keys run in parallel, with many more handlers than the topic
// has partitions. A plain consumer handles a partition's records one after
// the other, so its parallelism is the number of partitions.
//
// The consumer commits each partition only up to its lowest unfinished
// record: should the process crash, the records below the last commit are
// finished, and those above it are handled again. A handler that fails is
// retried with backoff, still before any later record of its key; past its
// retries the record is given up on (a dead-letter topic would get it:
// workleasekafka.WithDeadLetterTopic).
//
// By default the program starts an in-process Kafka cluster (kfake) and a
// producer that writes -records records over -keys keys while the consumer
// runs, so it needs nothing else; -brokers points it at a real cluster,
// where it writes to -topic (created with -partitions if it does not
// exist) and consumes from where the topic ended before the run. It prints
// its progress every second, and checks its work while it runs and at the
// end (see checker): every key's records were handled once each, in the
// order they were produced; no commit passed an unfinished record (each is
// checked before it is sent); and every partition was committed to its
// end. The exit status is 0 if all of that holds, 1 if anything went
// wrong, and 2 for a usage error.
//
//	cd examples/kafka && go run .
//	go run . -records 200000 -workers 256 -fail 0.1 -work 2ms
//	go run . -brokers localhost:9092 -topic worklease-example
//
// The run has one consumer, which keeps every partition to the end; the
// workleasekafka package documentation says what a group of several does
// when partitions move.
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease"
	"github.com/worklease/worklease/workleasekafka"
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
	QueueLimit int           // records fetched and not finished, at most
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
			"Produces records to a Kafka topic and consumes them with workleasekafka,\n"+
			"in order per key, committing each partition below its lowest unfinished\n"+
			"record, and checks the outcome. Flags:\n\n")
		fs.PrintDefaults()
	}
	var brokers string
	fs.StringVar(&brokers, "brokers", "", "comma-separated Kafka brokers (default: start an in-process cluster)")
	fs.StringVar(&cfg.Topic, "topic", cfg.Topic, "topic to produce to and consume")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the topic, if it is created")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "number of keys (the domains)")
	fs.IntVar(&cfg.Records, "records", cfg.Records, "number of records to produce and consume")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "number of handlers run at once")
	fs.IntVar(&cfg.QueueLimit, "queue", cfg.QueueLimit, "records fetched and not yet finished, at most; polling waits beyond")
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

	Produced                int64
	Processed, DeadLettered uint64 // by the consumer's counts
	Retries                 uint64 // failed attempts retried
	Commits                 uint64
	Elapsed                 time.Duration

	Checked bool    // the end-of-run check ran
	Outcome outcome // what it found
	// Verified: the check found nothing wrong, and the consumer's counts
	// agree with it.
	Verified bool
}

// print writes the summary's lines.
func (s *summary) print(w io.Writer) {
	if s.Cluster == "" {
		return // the run did not start
	}
	fmt.Fprintf(w, "kafka: done in %v: %d records produced, %d processed, %d given up, %d retries, %d commits\n",
		s.Elapsed.Round(time.Millisecond), s.Produced, s.Processed, s.DeadLettered, s.Retries, s.Commits)
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
	if !s.Verified && o.OrderViolations+o.CommitViolations == 0 {
		fmt.Fprintf(w, "  the consumer's counts (%d processed, %d given up, %d retries) disagree with the handler's (%d, %d, %d)\n",
			s.Processed, s.DeadLettered, s.Retries, o.Processed, o.DeadLettered, o.Retries)
	}
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
	fmt.Fprintf(out, "kafka: %d records over %d keys, topic %q (%d partitions, %s), group %q, %d handlers, %.3g%% of attempts failing\n",
		cfg.Records, cfg.Keys, cfg.Topic, len(starts), sum.Cluster, group, cfg.Workers, 100*cfg.FailRate)

	chk := newChecker(cfg.MaxRetries)
	fails := failer{rate: cfg.FailRate, seed: cfg.Seed}
	var errs errorLog
	c, err := workleasekafka.New([]kgo.Opt{
		kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(cfg.Topic),
	}, func(ctx context.Context, r *kgo.Record) error {
		return handle(ctx, r, cfg.Work, chk, fails)
	},
		workleasekafka.WithHandlers(cfg.Workers),
		workleasekafka.WithMaxUnfinished(cfg.QueueLimit),
		workleasekafka.WithMaxRetries(cfg.MaxRetries),
		workleasekafka.WithBackoff(cfg.Backoff),
		workleasekafka.WithCommitInterval(cfg.Commit),
		workleasekafka.WithCommitCheck(chk.commit),
		workleasekafka.WithErrorFunc(errs.add),
	)
	if err != nil {
		return sum, err
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(cfg.Topic))
	if err != nil {
		_ = c.Close(ctx)
		return sum, err
	}
	defer producer.Close()

	var (
		wg       sync.WaitGroup
		produced atomic.Int64
		ran      = make(chan error, 1)
	)
	go func() { ran <- c.Run(ctx) }()
	wg.Go(func() { // the producer
		if err := produce(ctx, producer, cfg.Records, cfg.Keys, cfg.Seed, chk, &produced); err != nil {
			cancel(err)
		}
	})
	wg.Go(func() { report(ctx, cancel, cfg, out, start, c, chk, &produced) })

	err = waitFinished(ctx, chk, cfg.Records)
	if err == nil {
		err = errs.first()
	}
	closeErr := c.Close(context.WithoutCancel(ctx)) // commits the last records
	cancel(nil)
	wg.Wait()
	if runErr := <-ran; err == nil && runErr != nil && !errors.Is(runErr, context.Canceled) {
		err = runErr
	}
	if err == nil {
		err = closeErr
	}
	if err == nil {
		err = errs.first() // the last commits'
	}
	st := c.Stats()
	sum.Produced, sum.Processed, sum.DeadLettered = produced.Load(), st.Handled, st.DeadLettered
	sum.Retries, sum.Commits = st.Retried, st.Commits
	if err != nil {
		return sum, err
	}

	fetchCtx, cancelFetch := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelFetch()
	ends, err := endOffsets(fetchCtx, adm, cfg.Topic)
	if err != nil {
		return sum, err
	}
	committed, err := committedOffsets(fetchCtx, adm, group, cfg.Topic)
	if err != nil {
		return sum, err
	}
	sum.Checked, sum.Outcome = true, chk.finish(starts, ends, committed)
	o := sum.Outcome
	sum.Verified = o.OrderViolations+o.CommitViolations == 0 &&
		int64(o.Records) == sum.Produced && uint64(o.Processed) == sum.Processed &&
		uint64(o.DeadLettered) == sum.DeadLettered && uint64(o.Retries) == sum.Retries
	if !sum.Verified {
		return sum, errors.New("the check failed")
	}
	return sum, nil
}

// handle is the consumer's handler: it works on one attempt at one record,
// and fails it at random.
func handle(ctx context.Context, r *kgo.Record, work time.Duration, chk *checker, fails failer) error {
	key, seq, ok := parseValue(r.Value)
	if !ok || key != string(r.Key) {
		chk.foreign(string(r.Key), r.Offset, r.Value)
		return nil
	}
	attempt := workleasekafka.AttemptFromContext(ctx)
	chk.begin(key)
	err := sleep(ctx, work)
	if err == nil && fails.fails(key, seq, attempt) {
		err = errInjected
	}
	// The check learns the outcome before the consumer does: it is never
	// behind a commit.
	chk.end(key, r.Partition, r.Offset, seq, attempt, err == nil)
	return err
}

var errInjected = errors.New("injected failure")

// An errorLog keeps the errors the consumer carried on after, but for
// the records it gave up on after an injected failure, which the check
// counts.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) add(err error) {
	if errors.Is(err, errInjected) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

// first returns the first error, if any.
func (l *errorLog) first() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	return fmt.Errorf("the consumer reported: %w", l.errs[0])
}

// waitFinished waits until n records are finished.
func waitFinished(ctx context.Context, chk *checker, n int) error {
	for {
		done, changed := chk.progress()
		if done >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

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

// report prints progress every cfg.Progress until ctx is done, and cancels
// the run if no record finished for cfg.Stall while some were unfinished.
func report(ctx context.Context, cancel context.CancelCauseFunc, cfg config, out io.Writer, start time.Time,
	c *workleasekafka.Consumer, chk *checker, produced *atomic.Int64) {
	t := time.NewTicker(cfg.Progress)
	defer t.Stop()
	lastDone, lastMove := -1, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		done, _ := chk.progress()
		st := c.Stats()
		fmt.Fprintf(out, "%6.1fs  produced %d  finished %d  unfinished %d  retries %d  committed %d times\n",
			time.Since(start).Seconds(), produced.Load(), done, st.Unfinished, st.Retried, st.Commits)
		if pending := int(produced.Load()) - done; done != lastDone || pending == 0 {
			lastDone, lastMove = done, time.Now()
		} else if time.Since(lastMove) > cfg.Stall {
			cancel(fmt.Errorf("no record finished for %v, %d unfinished: %s", cfg.Stall, pending, chk.heldUp()))
			return
		}
	}
}
