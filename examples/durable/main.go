// Command durable shows that a journaled worklease Manager keeps everything
// it acknowledged through a crash.
//
// It runs in three phases.
//
//  1. Work, then crash. The program re-executes itself as a child process,
//     which works through a fixed workload on a Manager journaled to a
//     wal.Log (wal.SyncAlways) in a directory, and prints each operation the
//     Manager acknowledged: an offset acquired, with its token; a retry
//     scheduled; an offset processed; an offset dead-lettered, with its
//     cause. After -acks acknowledgements the parent kills the child with
//     SIGKILL (Process.Kill): no deferred function, Close or flush runs.
//  2. Restart and check. A new Manager replays the journal in the same
//     directory, and the parent checks every acknowledged operation against
//     it: a processed offset answers AlreadyProcessed, a dead letter kept its
//     cause and attempt count, and a lease in flight at the crash is still
//     held under the token the child was given, which its holder (played by
//     the parent) then uses to finish it. An operation the journal made
//     durable but the child had no time to acknowledge is allowed; an
//     acknowledged one that is missing is a loss.
//  3. Finish. The parent completes the rest of the workload on the new
//     Manager, checks the final state and prints a summary.
//
// The exit status is 0 if nothing acknowledged was lost and the final state
// is right, 1 otherwise, and 2 for a usage error.
//
// The workload: domain "slow" holds one long job, offset 0, acquired first
// and never finished by the child, so a lease is always in flight at the
// crash. Domains d0, d1, ... each get offsets 0 to -offsets-1 in waves:
// offset o of every domain is acquired, then each is finished, before offset
// o+1, so several leases are usually in flight too. Every offset with
// o%5 == 1 fails twice: the first failure schedules a retry, the second
// gives up (WithMaxRetries(1)) and makes a dead letter.
//
// Run it from the module root:
//
//	go run ./examples/durable
//	go run ./examples/durable -acks 100 -domains 8 -offsets 30
//	go run ./examples/durable -dir /tmp/journal   # keep the journal, then:
//	go run ./cmd/worklease-wal verify /tmp/journal
//	go run ./examples/durable -simulate           # crash in-process instead
//
// Without -dir the journal lives in a new temporary directory, removed at the
// end; -dir must name a new or empty directory, which is kept.
//
// # Simulated crashes
//
// With -simulate, or where a process cannot re-execute itself (js, wasip1),
// the crash is simulated in one process: after -acks acknowledgements the
// worker stops and abandons its Manager and wal.Log without closing them, so
// nothing flushes, snapshots or syncs on the way out. Everything the Manager
// acknowledged is then on disk, as after a real crash. The difference is what
// the simulation cannot do: the crash always falls between two calls rather
// than anywhere (a real kill can land mid-write, leaving a torn tail, or
// after a record was made durable but before the child printed its
// acknowledgement), and no kernel releases the abandoned log's directory
// lock. To get past the lock the simulation keeps a copy of the directory's
// files as they were at the crash, closes the abandoned log (which writes
// nothing: every record was already synced), and puts the copy back before
// the restart, so that the new Manager reads exactly the bytes the crash
// left.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// childEnv, when set, makes the program the child: its value is the
// childSpec, in JSON. An environment variable rather than a flag, so that a
// test binary can be the child too (see TestMain).
const childEnv = "WORKLEASE_DURABLE_CHILD"

func main() {
	if spec, ok := os.LookupEnv(childEnv); ok {
		os.Exit(childMain(spec, os.Stdout, os.Stderr))
	}
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parent's configuration, from its flags.
type config struct {
	Dir      string        // the journal directory; "" for a new temporary one
	Acks     int           // acknowledgements before the crash
	Domains  int           // domains besides "slow"
	Offsets  int           // offsets per domain
	Pace     time.Duration // the child's pause between operations
	Simulate bool          // crash in-process
	Quiet    bool          // print only the phases and the summary

	sync wal.SyncMode // the journal's; tests may relax it
}

func defaultConfig() config {
	return config{Acks: 40, Domains: 4, Offsets: 20, Pace: 2 * time.Millisecond, sync: wal.SyncAlways}
}

// parseFlags parses args into a config. Errors and -h are reported on
// stderr.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("durable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: durable [flags]\n\n"+
			"Kills a worker that uses a journaled Manager after some acknowledged\n"+
			"operations, restarts on its journal and checks that nothing acknowledged\n"+
			"was lost. Exit status 0: nothing lost; 1: something lost; 2: usage.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.Dir, "dir", "", "journal `directory`, new or empty, kept afterwards (default: a temporary one, removed)")
	fs.IntVar(&cfg.Acks, "acks", cfg.Acks, "kill the worker after `n` acknowledged operations")
	fs.IntVar(&cfg.Domains, "domains", cfg.Domains, "`n` domains besides \"slow\"")
	fs.IntVar(&cfg.Offsets, "offsets", cfg.Offsets, "`n` offsets per domain")
	fs.DurationVar(&cfg.Pace, "pace", cfg.Pace, "the worker's pause between operations, so that the kill lands mid-way")
	fs.BoolVar(&cfg.Simulate, "simulate", false, "simulate the crash in-process instead of killing a child process")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "print only the phases and the summary")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	switch {
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments: %q", fs.Args())
	case cfg.Acks < 1:
		err = fmt.Errorf("-acks %d: must be at least 1", cfg.Acks)
	case cfg.Domains < 1 || cfg.Offsets < 1:
		err = fmt.Errorf("-domains and -offsets must be at least 1")
	case cfg.Pace < 0:
		err = fmt.Errorf("-pace %v: must not be negative", cfg.Pace)
	}
	if err != nil {
		fmt.Fprintf(stderr, "durable: %v\n", err)
		fs.Usage()
	}
	return cfg, err
}

// realMain is main with its arguments, output and exit status made explicit.
func realMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	sum, err := run(context.Background(), cfg, stdout, stderr)
	if errors.Is(err, errUsage) {
		fmt.Fprintf(stderr, "durable: %v\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "durable: %v\n", err)
		return 1
	}
	if sum.Lost > 0 || !sum.FinishedOK {
		return 1
	}
	return 0
}

// errUsage marks errors in the configuration found by run.
var errUsage = errors.New("usage")

// The workload.

// slowDomain holds the long job the child never finishes.
const slowDomain = "slow"

// workload is the fixed work both processes do.
type workload struct {
	Domains int
	Offsets int
}

func (w workload) domains() []string {
	ds := make([]string, w.Domains)
	for i := range ds {
		ds[i] = fmt.Sprintf("d%d", i)
	}
	return ds
}

// failing reports whether offset fails (twice, and is dead-lettered).
func failing(offset int64) bool { return offset%5 == 1 }

// cause is the error of attempt (1 or 2) of a failing offset.
func cause(domain string, offset int64, attempt int) string {
	return fmt.Sprintf("%s/%d: payment gateway timed out (attempt %d)", domain, offset, attempt)
}

// managerOptions are the options of both processes' Managers.
func managerOptions(j worklease.Journal) []worklease.Option {
	return []worklease.Option{worklease.WithJournal(j), worklease.WithMaxRetries(1)}
}

// An ack is one operation the Manager acknowledged: the call returned, so
// its records are durable.
type ack struct {
	N        int    `json:"n"`  // 1, 2, ... in the order of acknowledgement
	Op       string `json:"op"` // opAcquire, opRetry, opSucceed or opDead
	Domain   string `json:"domain"`
	Offset   int64  `json:"offset"`
	Token    string `json:"token,omitempty"`    // the lease's, for acquire and retry
	Retries  int    `json:"retries,omitempty"`  // retries scheduled so far, for retry
	Attempts int    `json:"attempts,omitempty"` // for dead
	Cause    string `json:"cause,omitempty"`    // for retry and dead
}

const (
	opAcquire = "acquire"
	opRetry   = "retry"
	opSucceed = "succeed"
	opDead    = "dead"
)

func (a ack) String() string {
	s := fmt.Sprintf("%-7s %s/%d", a.Op, a.Domain, a.Offset)
	switch a.Op {
	case opAcquire:
		s += " token " + a.Token
	case opRetry:
		s += fmt.Sprintf(" retry %d, cause %q", a.Retries, a.Cause)
	case opDead:
		s += fmt.Sprintf(" after %d attempts, cause %q", a.Attempts, a.Cause)
	}
	return s
}

// errCrash stops work when emit asks it to.
var errCrash = errors.New("crash")

// worker runs the workload on a Manager, reporting each acknowledged
// operation to emit, which returns false to make the worker stop there, as
// a crash would.
type worker struct {
	m    *worklease.Manager
	w    workload
	pace time.Duration
	emit func(ack) bool
	n    int // acknowledgements so far
}

func (wk *worker) ack(a ack) error {
	wk.n++
	a.N = wk.n
	if !wk.emit(a) {
		return errCrash
	}
	if wk.pace > 0 {
		time.Sleep(wk.pace)
	}
	return nil
}

// run does the workload from wherever the Manager's state is: it skips
// terminal offsets and carries on with leases in flight. It never finishes
// the slow job. It returns errCrash if emit stopped it.
func (wk *worker) run() error {
	res, err := wk.m.TryAcquire(slowDomain, 0)
	if err != nil {
		return err
	}
	if res.Status == worklease.Acquired {
		if err := wk.ack(ack{Op: opAcquire, Domain: slowDomain, Offset: 0, Token: res.Token.String()}); err != nil {
			return err
		}
	}
	type held struct {
		domain  string
		offset  int64
		token   worklease.Token
		retries int
	}
	for o := range int64(wk.w.Offsets) {
		var wave []held
		for _, d := range wk.w.domains() {
			res, err := wk.m.TryAcquire(d, o)
			if err != nil {
				return err
			}
			switch res.Status {
			case worklease.Acquired:
				if err := wk.ack(ack{Op: opAcquire, Domain: d, Offset: o, Token: res.Token.String()}); err != nil {
					return err
				}
				fallthrough
			case worklease.AlreadyAcquired: // in flight since before a restart
				wave = append(wave, held{d, o, res.Token, res.RetryCount})
			case worklease.AlreadyProcessed, worklease.AlreadyFailed:
			default:
				return fmt.Errorf("%s/%d: unexpected %v", d, o, res.Status)
			}
		}
		for _, h := range wave {
			if err := wk.finish(h.domain, h.offset, h.token, h.retries); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish completes the work on an offset held under tok with retries
// already scheduled: it succeeds, or fails until it is dead-lettered.
func (wk *worker) finish(domain string, offset int64, tok worklease.Token, retries int) error {
	if !failing(offset) {
		if _, err := wk.m.Succeed(domain, tok); err != nil {
			return err
		}
		return wk.ack(ack{Op: opSucceed, Domain: domain, Offset: offset})
	}
	for attempt := retries + 1; ; attempt++ {
		c := cause(domain, offset, attempt)
		res, err := wk.m.Fail(domain, tok, errors.New(c))
		if err != nil {
			return err
		}
		if res.Status == worklease.RetryScheduled {
			if err := wk.ack(ack{Op: opRetry, Domain: domain, Offset: offset, Token: tok.String(), Retries: res.RetryCount, Cause: c}); err != nil {
				return err
			}
			continue
		}
		return wk.ack(ack{Op: opDead, Domain: domain, Offset: offset, Attempts: attempt, Cause: c})
	}
}

// The child.

// childSpec is what the parent tells the child.
type childSpec struct {
	Dir     string        `json:"dir"`
	Domains int           `json:"domains"`
	Offsets int           `json:"offsets"`
	Pace    time.Duration `json:"pace"`
	Sync    string        `json:"sync"` // "always" (SyncAlways) or "interval" (SyncInterval)
}

// childMain runs the workload on the journal in spec.Dir and prints each
// acknowledgement as a line of JSON on stdout, in one write, until it is
// killed or done.
func childMain(specJSON string, stdout, stderr io.Writer) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(stderr, "durable child: bad %s: %v\n", childEnv, err)
		return 2
	}
	mode := wal.SyncAlways
	if spec.Sync == "interval" {
		mode = wal.SyncInterval(time.Hour) // written to the OS on every call, which SIGKILL cannot undo
	}
	l, err := wal.Open(spec.Dir, wal.WithSyncMode(mode))
	if err != nil {
		fmt.Fprintf(stderr, "durable child: %v\n", err)
		return 1
	}
	m, err := worklease.New(managerOptions(l)...)
	if err != nil {
		_ = l.Close()
		fmt.Fprintf(stderr, "durable child: %v\n", err)
		return 1
	}
	var werr error
	wk := &worker{m: m, w: workload{spec.Domains, spec.Offsets}, pace: spec.Pace, emit: func(a ack) bool {
		b, _ := json.Marshal(a) // an ack always marshals
		_, werr = stdout.Write(append(b, '\n'))
		return werr == nil
	}}
	err = wk.run()
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = werr
	}
	if err != nil {
		fmt.Fprintf(stderr, "durable child: %v\n", err)
		return 1
	}
	return 0
}

// The parent.

// summary is what a run found.
type summary struct {
	Dir        string
	Crash      string // how: "SIGKILL" or "simulated"
	Killed     bool   // the crash came before the worker finished the workload
	Acks       int    // operations acknowledged before the crash
	Found      int    // of which the restarted Manager has
	Lost       int    // of which it lacks
	Held       int    // leases in flight at the crash, still held and finished by their holders
	Unacked    int    // offsets that moved on after their last acknowledgement: durable, not acknowledged
	Torn       bool   // the restart found a torn tail
	Processed  int64  // at the end, over all domains
	Dead       int64
	FinishedOK bool // the final state is what the workload makes
}

func (s summary) print(w io.Writer) {
	fmt.Fprintf(w, "summary: %d operations acknowledged before the crash (%s), %d found after the restart, %d lost\n",
		s.Acks, s.Crash, s.Found, s.Lost)
	fmt.Fprintf(w, "         %d leases in flight at the crash, still held, finished by their holders under their tokens\n", s.Held)
	if s.Unacked > 0 {
		fmt.Fprintf(w, "         %d operations durable but not acknowledged before the crash (allowed)\n", s.Unacked)
	}
	if !s.Killed {
		fmt.Fprintf(w, "         the worker finished the whole workload before the crash: raise -offsets or lower -acks\n")
	}
	fmt.Fprintf(w, "         final state: %d offsets processed, %d dead-lettered, every domain idle: %v\n",
		s.Processed, s.Dead, yesNo(s.FinishedOK))
	if s.Lost == 0 && s.FinishedOK {
		fmt.Fprintln(w, "verified: nothing acknowledged was lost")
	} else {
		fmt.Fprintln(w, "FAILED: acknowledged operations were lost or the final state is wrong")
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// canExec reports whether the program can re-execute itself and kill the
// child.
func canExec() bool {
	switch runtime.GOOS {
	case "js", "wasip1", "ios":
		return false
	}
	return true
}

// run is the parent: crash, restart and check, finish.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (summary, error) {
	var sum summary
	dir := cfg.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "worklease-durable-")
		if err != nil {
			return sum, err
		}
		defer os.RemoveAll(tmp)
		dir = filepath.Join(tmp, "journal")
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return sum, fmt.Errorf("%w: -dir %s is not empty: give a new or empty directory", errUsage, dir)
	}
	sum.Dir = dir
	w := workload{cfg.Domains, cfg.Offsets}
	out := stdout
	if cfg.Quiet {
		out = io.Discard
	}

	simulate := cfg.Simulate
	if !simulate && !canExec() {
		fmt.Fprintf(stdout, "durable: %s cannot re-execute itself; simulating the crash in-process\n", runtime.GOOS)
		simulate = true
	}
	var exe string
	if !simulate {
		var err error
		if exe, err = os.Executable(); err != nil {
			fmt.Fprintf(stdout, "durable: cannot find my own executable (%v); simulating the crash in-process\n", err)
			simulate = true
		}
	}

	fmt.Fprintf(stdout, "journal: %s (%v)\n", dir, cfg.sync)
	var acks []ack
	var err error
	if simulate {
		sum.Crash = "simulated"
		fmt.Fprintf(stdout, "phase 1: a worker in this process works on a journaled Manager; it is abandoned after %d acknowledgements\n", cfg.Acks)
		acks, sum.Killed, err = crashInProcess(cfg, dir, w, out)
	} else {
		sum.Crash = "SIGKILL"
		acks, sum.Killed, err = crashChild(ctx, cfg, exe, dir, out, stdout, stderr)
	}
	if err != nil {
		return sum, err
	}
	sum.Acks = len(acks)

	fmt.Fprintf(stdout, "phase 2: a new Manager replays the journal; checking every acknowledged operation\n")
	l, err := wal.Open(dir, wal.WithSyncMode(cfg.sync))
	if err != nil {
		return sum, err
	}
	rc := l.Recovery()
	fmt.Fprintf(stdout, "  recovered records up to %d", rc.LastSeq)
	if rc.Torn != nil {
		sum.Torn = true
		fmt.Fprintf(stdout, "; cut a torn tail of %d bytes from %s (a write the kill interrupted)", rc.Torn.Bytes, rc.Torn.File)
	}
	fmt.Fprintln(stdout)
	m, err := worklease.New(managerOptions(l)...)
	if err != nil {
		_ = l.Close()
		return sum, err
	}
	defer m.Close()
	if err := check(m, w, acks, &sum, out); err != nil {
		return sum, err
	}

	fmt.Fprintf(stdout, "phase 3: finishing the remaining work\n")
	finished := 0
	wk := &worker{m: m, w: w, emit: func(a ack) bool {
		finished++
		return true
	}}
	if err := wk.run(); err != nil {
		return sum, err
	}
	fmt.Fprintf(out, "  %d more operations\n", finished)
	if err := checkFinal(m, w, &sum); err != nil {
		fmt.Fprintf(stdout, "  final state: %v\n", err)
	}
	if err := m.Close(); err != nil {
		return sum, err
	}
	sum.print(stdout)
	if cfg.Dir != "" {
		fmt.Fprintf(stdout, "the journal is in %s; inspect it with: go run ./cmd/worklease-wal verify %s\n", dir, dir)
	}
	return sum, nil
}

// crashChild runs the workload in a child process and kills it with SIGKILL
// after cfg.Acks acknowledgements. It returns every acknowledgement the
// child printed, including those that were on their way when it was killed,
// and whether it was killed before it finished.
func crashChild(ctx context.Context, cfg config, exe, dir string, out, stdout, stderr io.Writer) ([]ack, bool, error) {
	// The check below holds for the modes that keep every acknowledged
	// record through a process crash: SyncAlways, and SyncInterval. SyncNone
	// does not promise it, so it is not offered.
	sync := "always"
	if cfg.sync != wal.SyncAlways {
		sync = "interval"
	}
	spec, err := json.Marshal(childSpec{Dir: dir, Domains: cfg.Domains, Offsets: cfg.Offsets, Pace: cfg.Pace, Sync: sync})
	if err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // a hung child is killed too
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, err
	}
	if err := cmd.Start(); err != nil {
		return nil, false, err
	}
	fmt.Fprintf(stdout, "phase 1: child process %d works on a journaled Manager; it is killed after %d acknowledgements\n", cmd.Process.Pid, cfg.Acks)

	var acks []ack
	killed := false
	var perr error
	sc := bufio.NewScanner(pipe)
	for sc.Scan() { // until the pipe closes, when the child is gone
		var a ack
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			perr = fmt.Errorf("child printed %q: %w", sc.Text(), err)
			_ = cmd.Process.Kill()
			break
		}
		acks = append(acks, a)
		fmt.Fprintf(out, "  ack %3d  %v\n", a.N, a)
		if len(acks) == cfg.Acks && !killed {
			killed = cmd.Process.Kill() == nil // SIGKILL on Unix
			fmt.Fprintf(out, "  -- SIGKILL: acknowledgements already on their way are still read --\n")
		}
	}
	if perr == nil {
		perr = sc.Err()
	}
	werr := cmd.Wait()
	switch {
	case perr != nil:
		return nil, false, perr
	case killed && werr != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		// killed as planned; werr says so
	case werr != nil:
		return nil, false, fmt.Errorf("child process: %w", werr)
	default:
		killed = false // it finished before the kill took effect
	}
	fmt.Fprintf(stdout, "phase 1: the child acknowledged %d operations before it died (%v)\n", len(acks), describeExit(cmd))
	return acks, killed, nil
}

func describeExit(cmd *exec.Cmd) string {
	if cmd.ProcessState == nil {
		return "unknown"
	}
	return cmd.ProcessState.String()
}

// crashInProcess runs the workload in this process and abandons its
// Manager and log after cfg.Acks acknowledgements, without closing them. It
// then puts back the directory's files as the crash left them, once the
// abandoned log's lock is released: see the package comment.
func crashInProcess(cfg config, dir string, w workload, out io.Writer) ([]ack, bool, error) {
	l, err := wal.Open(dir, wal.WithSyncMode(cfg.sync))
	if err != nil {
		return nil, false, err
	}
	m, err := worklease.New(managerOptions(l)...)
	if err != nil {
		_ = l.Close()
		return nil, false, err
	}
	var acks []ack
	wk := &worker{m: m, w: w, emit: func(a ack) bool {
		acks = append(acks, a)
		fmt.Fprintf(out, "  ack %3d  %v\n", a.N, a)
		return len(acks) < cfg.Acks
	}}
	err = wk.run()
	killed := errors.Is(err, errCrash)
	if err != nil && !killed {
		_ = m.Close()
		return nil, false, err
	}
	if !killed {
		_ = m.Close() // done before the crash: a clean shutdown
		return acks, false, nil
	}
	fmt.Fprintf(out, "  -- crash: the Manager and its log are abandoned, not closed --\n")

	// m is abandoned here. The files as the crash left them:
	image, err := readFiles(dir)
	if err != nil {
		return nil, false, err
	}
	// Only to release the lock, which the process still holds.
	_ = l.Close()
	if err := writeFiles(dir, image); err != nil {
		return nil, false, err
	}
	return acks, true, nil
}

// readFiles returns the content of every file in dir.
func readFiles(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(entries))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	return files, nil
}

// writeFiles makes dir hold exactly files.
func writeFiles(dir string, files map[string][]byte) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// offsetKey names one offset of one domain.
type offsetKey struct {
	domain string
	offset int64
}

// check compares the restarted Manager with every acknowledged operation,
// offset by offset, from each offset's last acknowledgement, and finishes
// the leases still in flight as their holders would, under the tokens the
// crashed worker was given. It counts what it found in sum.
func check(m *worklease.Manager, w workload, acks []ack, sum *summary, out io.Writer) error {
	last := map[offsetKey]ack{}
	var order []offsetKey
	count := map[offsetKey]int{}
	for _, a := range acks {
		k := offsetKey{a.Domain, a.Offset}
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = a
		count[k]++
	}
	fin := &worker{m: m, w: w, emit: func(a ack) bool {
		fmt.Fprintf(out, "      then its holder: %v\n", a)
		return true
	}}
	for _, k := range order {
		a := last[k]
		ok, err := checkOffset(m, fin, a, sum, out)
		if err != nil {
			return err
		}
		if ok {
			sum.Found += count[k]
		} else {
			sum.Lost += count[k]
		}
	}
	return nil
}

// checkOffset checks one offset against its last acknowledgement a, and
// reports whether the Manager holds everything acknowledged for it.
func checkOffset(m *worklease.Manager, fin *worker, a ack, sum *summary, out io.Writer) (bool, error) {
	lost := func(format string, args ...any) (bool, error) {
		fmt.Fprintf(out, "  LOST %s/%d: last acknowledged %v; %s\n", a.Domain, a.Offset, a, fmt.Sprintf(format, args...))
		return false, nil
	}
	switch a.Op {
	case opSucceed:
		res, err := m.TryAcquire(a.Domain, a.Offset)
		if err != nil {
			return false, err
		}
		if res.Status != worklease.AlreadyProcessed {
			return lost("TryAcquire answers %v", res.Status)
		}
		fmt.Fprintf(out, "  ok  %s/%d processed: TryAcquire answers AlreadyProcessed\n", a.Domain, a.Offset)
		return true, nil

	case opDead:
		dls, err := m.DeadLetters(a.Domain)
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(dls, func(d worklease.DeadLetter) bool { return d.Offset == a.Offset })
		if i < 0 {
			return lost("not a dead letter")
		}
		if got := fmt.Sprint(dls[i].Cause); got != a.Cause || dls[i].Attempts != a.Attempts {
			return lost("dead letter after %d attempts with cause %q", dls[i].Attempts, got)
		}
		res, err := m.TryAcquire(a.Domain, a.Offset)
		if err != nil {
			return false, err
		}
		if res.Status != worklease.AlreadyFailed {
			return lost("TryAcquire answers %v", res.Status)
		}
		fmt.Fprintf(out, "  ok  %s/%d dead letter kept its cause %q and %d attempts\n", a.Domain, a.Offset, a.Cause, a.Attempts)
		return true, nil
	}

	// An acquire or a retry: the lease is still held under the same token,
	// with at least the acknowledged retries, unless a later operation
	// finished the offset before the crash without being acknowledged.
	info, err := m.Inspect(a.Domain)
	if err != nil {
		return false, err
	}
	if info.Leased && info.Lease.Offset == a.Offset {
		if info.Lease.Token.String() != a.Token || info.Lease.RetryCount < a.Retries {
			return lost("leased under %v with %d retries", info.Lease.Token, info.Lease.RetryCount)
		}
		if info.Lease.RetryCount > a.Retries {
			sum.Unacked++
		}
		tok, err := worklease.ParseToken(a.Token)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(out, "  ok  %s/%d still leased under token %s, %d retries\n", a.Domain, a.Offset, a.Token, info.Lease.RetryCount)
		sum.Held++
		if a.Domain == slowDomain {
			if _, err := m.Succeed(a.Domain, tok); err != nil {
				return false, fmt.Errorf("the holder of %s/%d could not finish it: %w", a.Domain, a.Offset, err)
			}
			fmt.Fprintf(out, "      then its holder: succeed %s/%d with that token\n", a.Domain, a.Offset)
			return true, nil
		}
		if err := fin.finish(a.Domain, a.Offset, tok, info.Lease.RetryCount); err != nil {
			return false, fmt.Errorf("the holder of %s/%d could not finish it: %w", a.Domain, a.Offset, err)
		}
		return true, nil
	}
	res, err := m.TryAcquire(a.Domain, a.Offset)
	if err != nil {
		return false, err
	}
	switch res.Status {
	case worklease.AlreadyProcessed, worklease.AlreadyFailed:
		fmt.Fprintf(out, "  ok  %s/%d finished after its last acknowledgement: durable, never acknowledged (%v)\n", a.Domain, a.Offset, res.Status)
		sum.Unacked++
		return true, nil
	}
	return lost("neither leased nor finished (TryAcquire answers %v)", res.Status)
}

// checkFinal checks that the workload is done: every domain idle, with the
// processed and dead-lettered offsets the workload makes and the causes of
// the final attempts. It records the counts in sum.
func checkFinal(m *worklease.Manager, w workload, sum *summary) error {
	var problems []string
	wantDead := int64(0)
	for o := range int64(w.Offsets) {
		if failing(o) {
			wantDead++
		}
	}
	for _, d := range append(w.domains(), slowDomain) {
		info, err := m.Inspect(d)
		if err != nil {
			return err
		}
		sum.Processed += info.Processed
		sum.Dead += info.Failed
		wantProcessed, wantFailed := int64(w.Offsets)-wantDead, wantDead
		if d == slowDomain {
			wantProcessed, wantFailed = 1, 0
		}
		if info.Leased || len(info.Backlog) > 0 || info.Processed != wantProcessed || info.Failed != wantFailed {
			problems = append(problems, fmt.Sprintf("%s: leased %v, backlog %v, %d processed, %d failed; want idle, %d and %d",
				d, info.Leased, info.Backlog, info.Processed, info.Failed, wantProcessed, wantFailed))
		}
		dls, err := m.DeadLetters(d)
		if err != nil {
			return err
		}
		for _, dl := range dls {
			if want := cause(d, dl.Offset, 2); !failing(dl.Offset) || fmt.Sprint(dl.Cause) != want || dl.Attempts != 2 {
				problems = append(problems, fmt.Sprintf("%s/%d: dead letter %q after %d attempts; want %q after 2", d, dl.Offset, dl.Cause, dl.Attempts, want))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	sum.FinishedOK = true
	return nil
}
