// Command orchestrator is a self-checking stream consumer built on worklease.
// It shows how an orchestrator drives a Manager: events are processed
// strictly in order per domain, failed attempts are retried with exponential
// backoff, offsets that keep failing are dead-lettered, and duplicate
// deliveries are ignored.
//
// Several producer goroutines emit events (domain, offset) for many domains,
// interleaved. Each domain's events come from one producer, with increasing
// offsets, and a few events are delivered twice, as an at-least-once stream
// does. Every event is routed by its domain to one of a pool of workers,
// which asks the Manager for the domain's lease:
//
//   - Acquired: do the work, then call SucceedNext or FailNext.
//   - Enqueued: the domain is busy with an earlier offset; this one waits in
//     the Manager's backlog until the worker holding the domain gets to it.
//   - AlreadyAcquired, AlreadyProcessed, AlreadyFailed: a duplicate delivery.
//
// SucceedNext finishes an offset and, in the same step, leases the backlog's
// head to the same worker, which works on it next: the domain is never idle
// with a backlog, so a delivery that arrives meanwhile is simply queued, and
// the intake needs no lock of its own. When FailNext schedules a retry, the
// lease is kept and the orchestrator (not the library) waits
// worklease.Backoff (base*2^retries plus up to 10% jitter) on a timer-driven
// retry queue, then retries under the same token. When the retries run out
// the offset is dead-lettered and FailNext leases the backlog's head in the
// same way.
//
// The program checks itself while it runs and at the end: in every domain
// the offsets reach a terminal state (processed or dead-lettered) exactly
// once and in production order, no two attempts run at once, fences never go
// backwards, and every domain ends idle with an empty backlog. A watchdog
// stops the run with a diagnosis if nothing progresses for several seconds.
// The exit status is 0 if all of that holds, 1 if anything went wrong, and 2
// for a usage error.
//
// Run it from the module root:
//
//	go run ./examples/orchestrator
//	go run ./examples/orchestrator -domains 10 -events 5000 -fail-rate 0.5 -max-retries 1
//	go run -race ./examples/orchestrator -quiet
//
// The failures an attempt meets depend only on -seed, so a seed replays the
// same outcome counts; run with -h for every flag.
package main

import (
	"container/heap"
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

	"github.com/worklease/worklease"
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
		fmt.Fprintf(stderr, "orchestrator: FAILED: %v\n", err)
		return 1
	}
	return 0
}

// config is what a run does; the flags set it.
type config struct {
	Domains    int
	Events     int
	Producers  int
	Workers    int
	FailRate   float64 // chance that one attempt fails
	DupRate    float64 // chance that an event is delivered a second time
	MaxRetries int     // passed to worklease.WithMaxRetries
	Seed       uint64  // drives the stream and the failures; 0 picks one at random
	Work       time.Duration
	BaseDelay  time.Duration // backoff base: retry n waits BaseDelay*2^n
	MaxDelay   time.Duration // cap on the backoff, before jitter
	Progress   time.Duration // how often to print progress and check for stalls
	Stall      time.Duration // the watchdog fails the run after this long without progress
	Quiet      bool          // print only the summary
}

// defaultConfig is tuned so that a run takes two to four seconds on two cores.
func defaultConfig() config {
	return config{
		Domains:    1000,
		Events:     50_000,
		Producers:  4,
		Workers:    32,
		FailRate:   0.10,
		DupRate:    0.03,
		MaxRetries: worklease.DefaultMaxRetries,
		Work:       time.Millisecond,
		BaseDelay:  time.Millisecond,
		MaxDelay:   100 * time.Millisecond,
		Progress:   500 * time.Millisecond,
		Stall:      5 * time.Second,
	}
}

func (c config) validate() error {
	switch {
	case c.Domains < 1 || c.Domains > 1_000_000:
		return errors.New("-domains must be between 1 and 1000000")
	case c.Events < 1 || c.Events > 10_000_000:
		return errors.New("-events must be between 1 and 10000000")
	case c.Producers < 1 || c.Producers > 1000:
		return errors.New("-producers must be between 1 and 1000")
	case c.Workers < 1 || c.Workers > 10_000:
		return errors.New("-workers must be between 1 and 10000")
	case !(c.FailRate >= 0 && c.FailRate <= 1): // written so that NaN fails too
		return errors.New("-fail-rate must be between 0 and 1")
	case !(c.DupRate >= 0 && c.DupRate <= 1):
		return errors.New("-dup-rate must be between 0 and 1")
	case c.MaxRetries < 0 || c.MaxRetries > 30:
		return errors.New("-max-retries must be between 0 and 30")
	case c.Work < 0 || c.Work > time.Minute:
		return errors.New("-work must be between 0 and 1m")
	case c.BaseDelay <= 0 || c.MaxDelay < c.BaseDelay || c.MaxDelay > time.Hour:
		return errors.New("backoff delays must satisfy 0 < base <= max <= 1h")
	case c.Progress <= 0 || c.Stall <= 0:
		return errors.New("progress and stall intervals must be positive")
	}
	return nil
}

// parseFlags parses args into a config. It reports errors and usage on
// stderr and returns flag.ErrHelp for -h.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("orchestrator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: go run ./examples/orchestrator [flags]\n\n"+
			"Processes a stream of events per domain through a worklease.Manager,\n"+
			"in order, with retries, dead letters and duplicate deliveries, and\n"+
			"checks the outcome. Flags:\n\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.Domains, "domains", cfg.Domains, "number of domains (keys processed in order)")
	fs.IntVar(&cfg.Events, "events", cfg.Events, "number of events, spread evenly over the domains")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "number of producer goroutines")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "number of worker goroutines")
	fs.Float64Var(&cfg.FailRate, "fail-rate", cfg.FailRate, "probability that one attempt fails")
	fs.Float64Var(&cfg.DupRate, "dup-rate", cfg.DupRate, "probability that an event is delivered twice")
	fs.IntVar(&cfg.MaxRetries, "max-retries", cfg.MaxRetries, "retries per offset before it is dead-lettered")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed for the stream and the failures (0: random)")
	fs.DurationVar(&cfg.Work, "work", cfg.Work, "mean duration of one simulated attempt")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "print only the summary")
	if err := fs.Parse(args); err != nil {
		return cfg, err // fs has reported it, with the usage
	}
	err := cfg.validate()
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator:", err)
		fs.Usage()
	}
	return cfg, err
}

// summary is the outcome of a run.
type summary struct {
	Seed                                    uint64
	Domains, Producers, Workers, MaxRetries int
	Events, Deliveries, DuplicatesInjected  int

	Processed, DeadLettered int64 // terminal outcomes; they add up to Events
	Retries                 int64 // Fail calls that returned RetryScheduled
	Enqueued                int64 // first deliveries that found their domain busy
	HandOffs                int64 // backlog heads leased by SucceedNext or FailNext

	// Duplicate deliveries, by what TryAcquire said about them.
	DupProcessed, DupFailed, DupInFlight, DupQueued int64

	OrderVerified bool // every domain finished its offsets once each, in order
	Elapsed       time.Duration
}

// DuplicatesIgnored counts the duplicate deliveries that the Manager turned away.
func (s summary) DuplicatesIgnored() int64 {
	return s.DupProcessed + s.DupFailed + s.DupInFlight + s.DupQueued
}

func (s summary) print(w io.Writer) {
	if s.Events == 0 {
		return // the run never started
	}
	yesNo := map[bool]string{true: "yes", false: "NO"}
	rate := float64(s.Processed+s.DeadLettered) / s.Elapsed.Seconds()
	fmt.Fprintf(w, "summary (seed %d)\n", s.Seed)
	fmt.Fprintf(w, "  events               %d over %d domains (%d producers, %d workers, max %d retries)\n",
		s.Events, s.Domains, s.Producers, s.Workers, s.MaxRetries)
	fmt.Fprintf(w, "  deliveries           %d (%d duplicates injected)\n", s.Deliveries, s.DuplicatesInjected)
	fmt.Fprintf(w, "  processed            %d\n", s.Processed)
	fmt.Fprintf(w, "  dead-lettered        %d\n", s.DeadLettered)
	fmt.Fprintf(w, "  retries              %d\n", s.Retries)
	fmt.Fprintf(w, "  queued               %d (arrived while their domain was busy)\n", s.Enqueued)
	fmt.Fprintf(w, "  handed off           %d (leased by SucceedNext or FailNext)\n", s.HandOffs)
	fmt.Fprintf(w, "  duplicates ignored   %d (already processed %d, already failed %d, in flight %d, already queued %d)\n",
		s.DuplicatesIgnored(), s.DupProcessed, s.DupFailed, s.DupInFlight, s.DupQueued)
	fmt.Fprintf(w, "  per-domain order     verified: %s\n", yesNo[s.OrderVerified])
	fmt.Fprintf(w, "  elapsed              %v\n", s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  throughput           %.0f events/s\n", rate)
}

// delivery is one message of the stream.
type delivery struct {
	dom    int32
	offset int64
	// redelivery marks a duplicate. The orchestrator's logic never reads it
	// (a real consumer can't tell); only the self-checks and counters do.
	redelivery bool
}

// plan is the whole stream, drawn up front from the seed.
type plan struct {
	streams  [][]delivery // per producer, in sending order
	produced [][]int64    // per domain, its offsets in production order
	dups     int
}

// makePlan deals the events round-robin to the domains, and each domain to
// producer dom%Producers. Each producer shuffles its events into a random
// interleaving of its domains; an event's offset is its position in the
// producer's stream, like a partition offset, so a domain's offsets increase
// with gaps. A duplicate is a second copy of one of the last few events,
// sent a little later, as after a consumer restart.
func makePlan(cfg config) plan {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	p := plan{
		streams:  make([][]delivery, cfg.Producers),
		produced: make([][]int64, cfg.Domains),
	}
	owned := make([][]int32, cfg.Producers) // one entry per event
	for e := range cfg.Events {
		dom := e % cfg.Domains
		owned[dom%cfg.Producers] = append(owned[dom%cfg.Producers], int32(dom))
	}
	for i, doms := range owned {
		rng.Shuffle(len(doms), func(a, b int) { doms[a], doms[b] = doms[b], doms[a] })
		stream := make([]delivery, 0, len(doms)+len(doms)/8)
		for off, dom := range doms {
			stream = append(stream, delivery{dom: dom, offset: int64(off)})
			p.produced[dom] = append(p.produced[dom], int64(off))
			if rng.Float64() < cfg.DupRate {
				again := off - rng.IntN(min(8, off+1))
				stream = append(stream, delivery{dom: doms[again], offset: int64(again), redelivery: true})
				p.dups++
			}
		}
		p.streams[i] = stream
	}
	return p
}

// domain is the orchestrator's side of one domain.
type domain struct {
	name     string
	produced []int64 // read-only during the run

	// mu guards the simulated sink below. complete holds it around
	// SucceedNext or FailNext and the record of their outcome, so that the
	// domain's next offset, which can only finish after that call, is
	// recorded after it. It is never held while working or waiting.
	mu        sync.Mutex
	done      []int64 // offsets in the order they became terminal
	fence     uint64  // highest fence the simulated sink has accepted
	processed int64
	dead      int64

	busy atomic.Bool // an attempt is running; checks that leases are exclusive
}

// job is a lease to work on.
type job struct {
	dom     int32
	offset  int64
	tok     worklease.Token
	retries int // retries scheduled so far for this offset
}

// errTransient is the failure of a simulated attempt.
var errTransient = errors.New("simulated transient failure")

// errFinished cancels the run's context once everything is done.
var errFinished = errors.New("run finished")

type orchestrator struct {
	cfg     config
	m       *worklease.Manager
	policy  worklease.Backoff // the orchestrator's, not the library's: it never waits
	domains []domain
	inboxes []chan delivery // one per worker; a domain always goes to the same one
	ready   chan job        // retries whose backoff is over
	backoff retryQueue

	outstanding atomic.Int64  // deliveries not yet taken in, plus events not yet terminal
	allDone     chan struct{} // closed when outstanding reaches zero

	cancel context.CancelCauseFunc
	errMu  sync.Mutex
	errs   []error

	delivered, processed, dead, retries, enqueued, handOffs atomic.Int64
	dupProcessed, dupFailed, dupInFlight, dupQueued         atomic.Int64
}

// run processes the stream cfg describes through a new Manager, checks the
// result, and returns a summary. It writes progress to out unless cfg.Quiet.
// It returns an error if a check failed, a Manager call failed unexpectedly,
// the watchdog fired, or ctx was canceled; every goroutine and timer it
// started has stopped by the time it returns.
func run(ctx context.Context, cfg config, out io.Writer) (summary, error) {
	if err := cfg.validate(); err != nil {
		return summary{}, err
	}
	if out == nil {
		out = io.Discard
	}
	for cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	m, err := worklease.New(worklease.WithMaxRetries(cfg.MaxRetries))
	if err != nil {
		return summary{}, err
	}
	defer m.Close() // a Manager holds no goroutines or files; Close just fences off late calls
	p := makePlan(cfg)
	o := &orchestrator{
		cfg:     cfg,
		m:       m,
		policy:  worklease.Backoff{Base: cfg.BaseDelay, Max: cfg.MaxDelay},
		domains: make([]domain, cfg.Domains),
		inboxes: make([]chan delivery, cfg.Workers),
		ready:   make(chan job, cfg.Workers),
		backoff: retryQueue{wake: make(chan struct{}, 1)},
		allDone: make(chan struct{}),
	}
	width := len(strconv.Itoa(cfg.Domains - 1))
	for i := range o.domains {
		o.domains[i].name = fmt.Sprintf("domain-%0*d", width, i)
		o.domains[i].produced = p.produced[i]
	}
	for i := range o.inboxes {
		o.inboxes[i] = make(chan delivery, 64)
	}
	deliveries := cfg.Events + p.dups
	o.outstanding.Store(int64(deliveries + cfg.Events))

	if !cfg.Quiet {
		fmt.Fprintf(out, "orchestrator: %d events (+%d duplicates) over %d domains, %d producers, %d workers, "+
			"fail-rate %g, dup-rate %g, max-retries %d, seed %d\n",
			cfg.Events, p.dups, cfg.Domains, cfg.Producers, cfg.Workers, cfg.FailRate, cfg.DupRate, cfg.MaxRetries, cfg.Seed)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	o.cancel = cancel
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { o.backoff.run(ctx, o.ready) })
	for _, inbox := range o.inboxes {
		wg.Go(func() { o.worker(ctx, inbox) })
	}
	for _, stream := range p.streams {
		wg.Go(func() { o.produce(ctx, stream) })
	}
	wg.Go(func() { o.monitor(ctx, start, out) })

	var stopped error // why the run stopped early, if it did
	select {
	case <-o.allDone:
	case <-ctx.Done():
		stopped = context.Cause(ctx)
	}
	elapsed := time.Since(start)
	cancel(errFinished)
	wg.Wait() // no goroutine of ours touches o after this

	sum := summary{
		Seed: cfg.Seed, Domains: cfg.Domains, Producers: cfg.Producers, Workers: cfg.Workers,
		MaxRetries: cfg.MaxRetries, Events: cfg.Events, Deliveries: deliveries, DuplicatesInjected: p.dups,
		Processed: o.processed.Load(), DeadLettered: o.dead.Load(), Retries: o.retries.Load(),
		Enqueued: o.enqueued.Load(), HandOffs: o.handOffs.Load(),
		DupProcessed: o.dupProcessed.Load(), DupFailed: o.dupFailed.Load(),
		DupInFlight: o.dupInFlight.Load(), DupQueued: o.dupQueued.Load(),
		Elapsed: elapsed,
	}
	o.errMu.Lock()
	errs := o.errs
	o.errMu.Unlock()
	if len(errs) == 0 && stopped != nil { // the caller canceled ctx
		errs = append(errs, fmt.Errorf("interrupted: %w", stopped))
	}
	if len(errs) > 0 {
		return sum, errors.Join(errs...)
	}
	sum.OrderVerified, err = o.verify()
	return sum, err
}

// fail records an error and stops the run.
func (o *orchestrator) fail(err error) {
	o.errMu.Lock()
	if len(o.errs) < 10 { // the first few tell the story
		o.errs = append(o.errs, err)
	}
	o.errMu.Unlock()
	o.cancel(err)
}

// finish counts one delivery taken in or one event made terminal.
func (o *orchestrator) finish() {
	if o.outstanding.Add(-1) == 0 {
		close(o.allDone)
	}
}

// produce sends one producer's stream. A domain's events all come from one
// producer and go to one worker's inbox, so each domain's TryAcquire calls
// happen in production order: the Manager keeps the order of the offsets it
// is given, it cannot restore an order the caller lost.
func (o *orchestrator) produce(ctx context.Context, stream []delivery) {
	for _, dl := range stream {
		select {
		case o.inboxes[int(dl.dom)%len(o.inboxes)] <- dl:
		case <-ctx.Done():
			return
		}
	}
}

// worker takes in the deliveries of its inbox and runs the retries that come
// due, whatever their domain.
func (o *orchestrator) worker(ctx context.Context, inbox <-chan delivery) {
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case dl := <-inbox:
			o.intake(ctx, dl)
		case j := <-o.ready:
			o.retry(ctx, j)
		}
	}
}

// intake handles one delivery. It takes no lock: the domain's worker
// finishes offsets with SucceedNext and FailNext, which never leave the
// domain idle with a backlog, so TryAcquire never answers ErrBacklogOrder
// here, whenever the delivery arrives.
func (o *orchestrator) intake(ctx context.Context, dl delivery) {
	d := &o.domains[dl.dom]
	res, err := o.m.TryAcquire(d.name, dl.offset)
	o.delivered.Add(1)
	o.finish()
	if err != nil {
		o.fail(fmt.Errorf("intake: TryAcquire(%s, %d): %w", d.name, dl.offset, err))
		return
	}
	// Self-check: a duplicate is never granted, and a first delivery is
	// never reported as seen before; either would mean double or lost work.
	unexpected := func() {
		kind := "first delivery"
		if dl.redelivery {
			kind = "redelivery"
		}
		o.fail(fmt.Errorf("intake: TryAcquire(%s, %d) = %v for a %s", d.name, dl.offset, res.Status, kind))
	}
	switch res.Status {
	case worklease.Acquired:
		if dl.redelivery {
			unexpected()
			return
		}
		o.execute(ctx, job{dom: dl.dom, offset: dl.offset, tok: res.Token})
	case worklease.Enqueued:
		// The domain is busy, often with an offset that is backing off. The
		// Manager keeps this one in its backlog, in order, de-duplicated.
		// The worker holding the domain will get its lease; we must not
		// work on it.
		if dl.redelivery {
			o.dupQueued.Add(1)
		} else {
			o.enqueued.Add(1)
		}
	case worklease.AlreadyAcquired:
		// Someone holds the lease on this very offset (it may be backing
		// off). The result carries the holder's token, but it is not ours
		// to use: working on it here would run the offset twice.
		if !dl.redelivery {
			unexpected()
			return
		}
		o.dupInFlight.Add(1)
	case worklease.AlreadyProcessed, worklease.AlreadyFailed:
		if !dl.redelivery {
			unexpected()
			return
		}
		if res.Status == worklease.AlreadyProcessed {
			o.dupProcessed.Add(1)
		} else {
			o.dupFailed.Add(1)
		}
	default:
		o.fail(fmt.Errorf("intake: TryAcquire(%s, %d): unknown status %v", d.name, dl.offset, res.Status))
	}
}

// retry runs an offset whose backoff is over. FailNext kept the lease, so
// TryAcquire answers AlreadyAcquired with the token and retry count we hold.
func (o *orchestrator) retry(ctx context.Context, j job) {
	d := &o.domains[j.dom]
	res, err := o.m.TryAcquire(d.name, j.offset)
	if err != nil || res.Status != worklease.AlreadyAcquired || res.Token != j.tok || res.RetryCount != j.retries {
		o.fail(fmt.Errorf("retry: TryAcquire(%s, %d) = %v token %v retries %d, %v; want AlreadyAcquired token %v retries %d",
			d.name, j.offset, res.Status, res.Token, res.RetryCount, err, j.tok, j.retries))
		return
	}
	o.execute(ctx, j)
}

// execute works on j, then on each offset SucceedNext or FailNext hands to
// it, until the domain is idle or its current offset is backing off.
func (o *orchestrator) execute(ctx context.Context, j job) {
	for {
		err := o.attempt(ctx, j)
		if ctx.Err() != nil {
			return // shutting down: the lease stays with the Manager, unused
		}
		next, ok := o.complete(j, err)
		if !ok {
			return
		}
		j = next
	}
}

// attempt is the simulated work: a short wait, like a call to another
// service, that fails at random.
func (o *orchestrator) attempt(ctx context.Context, j job) error {
	d := &o.domains[j.dom]
	if !d.busy.CompareAndSwap(false, true) {
		err := fmt.Errorf("%s: two attempts at once (offset %d): leases are not exclusive", d.name, j.offset)
		o.fail(err)
		return err
	}
	defer d.busy.Store(false)
	if w := o.cfg.Work; w > 0 {
		t := time.NewTimer(w/2 + rand.N(w)) // uniform around w
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The outcome depends only on the seed and the attempt, never on
	// timing, so that a seed replays the same failures.
	r := rand.New(rand.NewPCG(o.cfg.Seed^uint64(j.dom)<<32, uint64(j.offset)<<8|uint64(j.retries)))
	if r.Float64() < o.cfg.FailRate {
		return errTransient
	}
	return nil
}

// complete reports the outcome of an attempt to the Manager and returns the
// next job in the domain if SucceedNext or FailNext leased one to us.
//
// d.mu is held throughout, for the sink's records: once SucceedNext or
// FailNext returns, the domain's next offset may be granted to another
// worker (the intake, when the backlog was empty), and its outcome must be
// recorded after this one's.
func (o *orchestrator) complete(j job, workErr error) (next job, ok bool) {
	d := &o.domains[j.dom]
	d.mu.Lock()
	defer d.mu.Unlock()

	if workErr == nil {
		// A sink that remembers the highest fence per domain rejects writes
		// from a holder that has since lost its lease. Retries share a
		// token, so an equal fence is fine.
		if f := j.tok.Fence(); f < d.fence {
			o.fail(fmt.Errorf("%s: offset %d committed with fence %d after fence %d", d.name, j.offset, f, d.fence))
			return job{}, false
		}
		d.fence = j.tok.Fence()
		res, err := o.m.SucceedNext(d.name, j.tok)
		if err != nil {
			o.fail(fmt.Errorf("SucceedNext(%s) for offset %d: %w", d.name, j.offset, err))
			return job{}, false
		}
		o.terminal(d, j.offset, false)
		switch res.Status {
		case worklease.NextAcquired:
			return o.handOff(j.dom, res.Lease), true
		case worklease.NoBacklog:
			return job{}, false
		}
		o.fail(fmt.Errorf("SucceedNext(%s): unexpected status %v", d.name, res.Status))
		return job{}, false
	}

	res, err := o.m.FailNext(d.name, j.tok, workErr)
	if err != nil {
		o.fail(fmt.Errorf("FailNext(%s) for offset %d: %w", d.name, j.offset, err))
		return job{}, false
	}
	switch res.Status {
	case worklease.RetryScheduled:
		// We keep the lease; the domain's later offsets queue behind it.
		o.retries.Add(1)
		j.retries = res.RetryCount
		o.backoff.schedule(j, o.policy.Delay(res.RetryCount))
		return job{}, false
	case worklease.GiveUpNextAcquired:
		o.terminal(d, j.offset, true)
		return o.handOff(j.dom, res.Lease), true
	case worklease.GiveUpNoBacklog:
		o.terminal(d, j.offset, true)
		return job{}, false
	}
	o.fail(fmt.Errorf("FailNext(%s): unexpected status %v", d.name, res.Status))
	return job{}, false
}

// handOff is the job of the lease SucceedNext or FailNext granted us: the
// backlog's head, which nobody else can have been granted.
func (o *orchestrator) handOff(dom int32, l worklease.LeaseInfo) job {
	o.handOffs.Add(1)
	return job{dom: dom, offset: l.Offset, tok: l.Token, retries: l.RetryCount}
}

// terminal records that offset reached a terminal state, and checks that it
// is the domain's next offset in production order. d.mu is held.
func (o *orchestrator) terminal(d *domain, offset int64, dead bool) {
	d.done = append(d.done, offset)
	if n := len(d.done) - 1; n >= len(d.produced) || d.produced[n] != offset {
		o.fail(fmt.Errorf("%s: offset %d finished out of order: %s", d.name, offset, orderDiff(d.done, d.produced)))
	}
	if dead {
		d.dead++
		o.dead.Add(1)
	} else {
		d.processed++
		o.processed.Add(1)
	}
	o.finish()
}

// retryQueue holds the jobs that are backing off, earliest first, and hands
// each one to the workers when its time comes. One goroutine and one timer
// serve them all: a job that is waiting holds neither a worker nor a
// goroutine of its own.
type retryQueue struct {
	mu   sync.Mutex
	jobs retryHeap
	wake chan struct{} // capacity 1: the earliest due time may have changed
}

type retryItem struct {
	due time.Time
	job job
}

// retryHeap implements heap.Interface, ordered by due time.
type retryHeap []retryItem

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h retryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)        { *h = append(*h, x.(retryItem)) }
func (h *retryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// schedule queues j to be retried after delay. It never blocks.
func (q *retryQueue) schedule(j job, delay time.Duration) {
	q.mu.Lock()
	heap.Push(&q.jobs, retryItem{due: time.Now().Add(delay), job: j})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// len returns the number of jobs backing off.
func (q *retryQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.jobs.Len()
}

// run sends each job to ready when it is due, until ctx is done.
func (q *retryQueue) run(ctx context.Context, ready chan<- job) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		var (
			due  job
			ok   bool
			wait time.Duration = -1 // nothing queued
		)
		if q.jobs.Len() > 0 {
			if wait = time.Until(q.jobs[0].due); wait <= 0 {
				due, ok = heap.Pop(&q.jobs).(retryItem).job, true
			}
		}
		q.mu.Unlock()
		if ok {
			select {
			case ready <- due:
				continue
			case <-ctx.Done():
				return
			}
		}
		// Since Go 1.23, Stop and Reset leave no stale tick in timer.C.
		if wait >= 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-timer.C:
		}
	}
}

// monitor prints progress and is the watchdog: if nothing moves for
// cfg.Stall it fails the run with a description of the stuck domains,
// rather than letting it hang.
func (o *orchestrator) monitor(ctx context.Context, start time.Time, out io.Writer) {
	tick := time.NewTicker(o.cfg.Progress)
	defer tick.Stop()
	var lastDone, lastMoves int64
	lastTick, lastMove := start, start
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			done := o.processed.Load() + o.dead.Load()
			if !o.cfg.Quiet {
				fmt.Fprintf(out, "%6.1fs  %d/%d events done (%3.0f%%)  %6.0f events/s  %3d backing off  %d dead-lettered\n",
					now.Sub(start).Seconds(), done, o.cfg.Events, 100*float64(done)/float64(o.cfg.Events),
					float64(done-lastDone)/now.Sub(lastTick).Seconds(), o.backoff.len(), o.dead.Load())
			}
			lastDone, lastTick = done, now
			if moves := done + o.delivered.Load() + o.retries.Load(); moves != lastMoves {
				lastMoves, lastMove = moves, now
			} else if now.Sub(lastMove) >= o.cfg.Stall {
				o.fail(o.stalled(now.Sub(lastMove)))
				return
			}
		}
	}
}

// stalled describes a run that stopped moving: the counters, and the
// unfinished domains as the Manager sees them, those holding a lease first.
func (o *orchestrator) stalled(idle time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "watchdog: no progress for %v: %d/%d events terminal, %d deliveries taken in, %d backing off",
		idle.Round(time.Millisecond), o.processed.Load()+o.dead.Load(), o.cfg.Events, o.delivered.Load(), o.backoff.len())
	var leased, other []string
	for i := range o.domains {
		d := &o.domains[i]
		d.mu.Lock()
		n := len(d.done)
		d.mu.Unlock()
		if n == len(d.produced) {
			continue
		}
		info, err := o.m.Inspect(d.name)
		line := fmt.Sprintf("%s: %d/%d offsets terminal, next should be %d; manager: %s",
			d.name, n, len(d.produced), d.produced[n], describe(info, err))
		if info.Leased || len(info.Backlog) > 0 {
			leased = append(leased, line)
		} else {
			other = append(other, line)
		}
	}
	fmt.Fprintf(&b, "; %d domains unfinished, %d of them leased or queued", len(leased)+len(other), len(leased))
	for i, line := range append(leased, other...) {
		if i == 5 {
			b.WriteString("\n  ...")
			break
		}
		b.WriteString("\n  " + line)
	}
	return errors.New(b.String())
}

// describe renders what Inspect said about a domain.
func describe(info worklease.DomainInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	if info.Leased {
		fmt.Fprintf(&b, "leased on offset %d (%d retries, first granted %v ago)",
			info.Lease.Offset, info.Lease.RetryCount, time.Since(info.Lease.AcquiredAt).Round(time.Millisecond))
	} else {
		b.WriteString("idle")
	}
	fmt.Fprintf(&b, ", backlog %v, %d processed, %d failed", info.Backlog, info.Processed, info.Failed)
	return b.String()
}

// verify checks the end state, once every goroutine has stopped: each
// domain finished all its offsets once each in production order, and the
// Manager agrees, with every domain idle and its backlog empty. It reports
// whether the order held, and every problem it found.
func (o *orchestrator) verify() (orderOK bool, err error) {
	var errs []error
	add := func(err error) {
		if len(errs) < 10 {
			errs = append(errs, err)
		}
	}
	orderOK = true
	for i := range o.domains {
		d := &o.domains[i]
		if !slices.Equal(d.done, d.produced) {
			orderOK = false
			add(fmt.Errorf("%s: %s", d.name, orderDiff(d.done, d.produced)))
		}
		info, err := o.m.Inspect(d.name)
		switch {
		case err != nil:
			add(fmt.Errorf("Inspect(%s): %w", d.name, err))
		case info.Leased || len(info.Backlog) > 0:
			add(fmt.Errorf("%s: not idle at the end: %s", d.name, describe(info, nil)))
		case info.Processed != d.processed || info.Failed != d.dead:
			add(fmt.Errorf("%s: manager counts %d processed, %d failed; we saw %d, %d",
				d.name, info.Processed, info.Failed, d.processed, d.dead))
		}
	}
	if n := o.processed.Load() + o.dead.Load(); n != int64(o.cfg.Events) {
		add(fmt.Errorf("%d events terminal, want %d", n, o.cfg.Events))
	}
	// Every first delivery that was queued must have been handed off once.
	if q, h := o.enqueued.Load(), o.handOffs.Load(); q != h {
		add(fmt.Errorf("%d offsets queued but %d handed off", q, h))
	}
	return orderOK, errors.Join(errs...)
}

// orderDiff explains how the offsets a domain finished, in order, differ
// from the offsets it produced.
func orderDiff(done, produced []int64) string {
	for i, off := range done {
		switch {
		case i >= len(produced):
			return fmt.Sprintf("offset %d finished but only %d were produced", off, len(produced))
		case off != produced[i]:
			return fmt.Sprintf("terminal #%d is offset %d, want %d", i+1, off, produced[i])
		}
	}
	if len(done) < len(produced) {
		return fmt.Sprintf("only %d of %d offsets finished; offset %d never did", len(done), len(produced), produced[len(done)])
	}
	return "in order"
}
