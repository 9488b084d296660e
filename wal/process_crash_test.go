//go:build unix

package wal_test

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// TestProcessCrash kills a real process with SIGKILL in the middle of a
// journaled workload, many times over on the same directory, and checks
// after each kill that everything the process acknowledged survived.
//
// The test binary runs itself as the child (TestCrashChild). The child opens
// the directory with wal.Open, builds a Manager on it and drives a
// deterministic random workload over a few domains, printing a "do" line
// before each call and an "ack" line once the call returned, each with one
// write to its stdout, which is a pipe. The parent reads the lines and kills
// the child after a random number of acknowledgements, or after a random
// time. It then reads what the child had written before it died, reopens the
// directory and checks every domain against what the acknowledgements imply:
// processed offsets are AlreadyProcessed, failed ones are dead letters, the
// lease last granted and not finished is still held under the same token
// and retry count, and the backlog is the offsets acknowledged as queued, in
// order, and nothing else. Offsets are queued with Enqueue and a payload of
// up to a few KiB (segments are 32 KiB, and snapshots frequent, so that
// payloads outlive the segments' removal): every offset acknowledged as
// queued, and not processed, comes back with its exact bytes. The one call in flight at the kill (a "do" line
// with no "ack") may or may not have taken effect, wholly; nothing else may
// differ. The next child carries on from the recovered state: it finishes
// the leases it finds, drains the backlogs, and is killed in turn.
//
// Three kills run by default; set -crash.iterations (go test ./wal -run
// TestProcessCrash -crash.iterations=100) or WORKLEASE_CRASH_ITERATIONS for
// more.
func TestProcessCrash(t *testing.T) {
	// Not parallel: a child inherits, between fork and exec, every file the
	// test process has open, a journal's LOCK included, and a flock lasts
	// until the last copy closes; a parallel test reopening its journal in
	// that moment would find it locked.
	iterations := *crashIterations
	if s := os.Getenv("WORKLEASE_CRASH_ITERATIONS"); s != "" && iterations == 0 {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "WORKLEASE_CRASH_ITERATIONS")
		iterations = n
	}
	if iterations == 0 {
		iterations = 3
	}
	dir := t.TempDir()
	model := newCrashModel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for it := range iterations {
		// The seed decides the child's workload; the kill's timing is
		// random, and no assertion depends on it.
		seed := uint64(it + 1)
		lines := runCrashChild(t, dir, seed, rng)
		before := model.acks
		inflight := model.applyLines(t, lines)
		took, st := model.verify(t, dir, inflight)
		t.Logf("kill %d: %d calls acknowledged; in flight: %q (took effect: %v); the log: %d records after a snapshot of %d, %d segments",
			it+1, model.acks-before, inflight, took, st.RecordsSinceSnapshot, st.SnapshotSeq, st.Segments)
	}
}

var crashIterations = flag.Int("crash.iterations", 0, "how many times TestProcessCrash kills its child (default 3)")

// The child's environment.
const (
	crashDirEnv  = "WORKLEASE_CRASH_CHILD_DIR"
	crashSeedEnv = "WORKLEASE_CRASH_CHILD_SEED"
)

// crashChildLimit bounds the child's life should nobody kill it.
const crashChildLimit = 30 * time.Second

var crashChildDomains = []string{"d0", "d1", "d2", "d3", "d4"}

// TestCrashChild is the child of TestProcessCrash; without its environment
// it skips at once.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child of TestProcessCrash")
	}
	seed, err := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	require.NoError(t, err)
	err = crashChild(dir, seed, os.Stdout)
	require.NoError(t, err)
	t.Fatalf("not killed within %v", crashChildLimit)
}

// crashChild runs the workload until it is killed, or for crashChildLimit,
// printing one line before each call and one after each acknowledgement.
func crashChild(dir string, seed uint64, out io.Writer) (err error) {
	j, err := wal.Open(dir, wal.WithSegmentSize(32<<10), wal.WithSnapshotEvery(8<<10))
	if err != nil {
		return err
	}
	m, err := worklease.New(worklease.WithJournal(j), worklease.WithMaxRetries(1))
	if err != nil {
		_ = j.Close()
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	say := func(format string, args ...any) error {
		_, err := fmt.Fprintf(out, format+"\n", args...) // one write: a whole line
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6368696c64))
	next := int64(seed) * 1_000_000 // offsets no earlier child used
	for start := time.Now(); time.Since(start) < crashChildLimit; {
		d := crashChildDomains[rng.IntN(len(crashChildDomains))]
		info, err := m.Inspect(d)
		if err != nil {
			return err
		}
		l := info.Lease
		if err := crashStep(m, say, rng, d, info, l, &next); err != nil {
			return err
		}
	}
	return nil
}

// crashStep makes one call on domain d, whose state is info, saying what it
// does before and what was acknowledged after.
func crashStep(m *worklease.Manager, say func(string, ...any) error, rng *rand.Rand, d string, info worklease.DomainInfo, l worklease.LeaseInfo, next *int64) error {
	switch k := rng.IntN(20); {
	case !info.Leased: // acquire the backlog's head, or a new offset
		off := *next
		if len(info.Backlog) > 0 {
			off = info.Backlog[0]
		} else {
			*next++
		}
		if err := say("do acquire %s %d", d, off); err != nil {
			return err
		}
		res, err := m.TryAcquire(d, off)
		if err != nil || res.Status != worklease.Acquired {
			return fmt.Errorf("TryAcquire(%s, %d) = %v, %v", d, off, res.Status, err)
		}
		return say("ack lease %s %d %v %d", d, off, res.Token, res.RetryCount)
	case k < 9:
		if err := say("do succeed %s %d %v", d, l.Offset, l.Token); err != nil {
			return err
		}
		if _, err := m.Succeed(d, l.Token); err != nil {
			return err
		}
		return say("ack processed %s %d", d, l.Offset)
	case k < 14:
		if err := say("do fail %s %d %v", d, l.Offset, l.Token); err != nil {
			return err
		}
		res, err := m.Fail(d, l.Token, fmt.Errorf("attempt %d failed", l.RetryCount+1))
		switch {
		case err != nil:
			return err
		case res.Status == worklease.RetryScheduled:
			return say("ack retry %s %d %d", d, l.Offset, res.RetryCount)
		default:
			return say("ack failed %s %d", d, l.Offset)
		}
	case k < 18: // another offset waits behind the lease
		off := *next
		*next++
		if err := say("do enqueue %s %d", d, off); err != nil {
			return err
		}
		st, err := m.Enqueue(d, off, crashPayload(d, off))
		if err != nil || st != worklease.Enqueued {
			return fmt.Errorf("Enqueue(%s, %d) = %v, %v", d, off, st, err)
		}
		return say("ack queued %s %d", d, off)
	default: // kill the lease's offset, or a queued one
		off := l.Offset
		if len(info.Backlog) > 0 && rng.IntN(2) == 0 {
			off = info.Backlog[rng.IntN(len(info.Backlog))]
		}
		if err := say("do kill %s %d", d, off); err != nil {
			return err
		}
		if _, err := m.Kill(d, off, "killed"); err != nil {
			return err
		}
		return say("ack failed %s %d", d, off)
	}
}

// crashPayload returns the payload the child enqueues offset off of domain
// d with: 0 to 4 KiB of bytes that depend on both.
func crashPayload(d string, off int64) []byte {
	rng := rand.New(rand.NewPCG(uint64(off), uint64(len(d))<<32|uint64(d[len(d)-1])))
	p := make([]byte, rng.IntN(4<<10))
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// runCrashChild starts a child on dir, kills it, and returns every line it
// wrote.
func runCrashChild(t *testing.T, dir string, seed uint64, rng *rand.Rand) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashSeedEnv+"="+strconv.FormatUint(seed, 10))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	var once sync.Once
	kill := func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGKILL) }) }
	defer kill() // should the test fail before it kills the child
	// Kill after a random number of acknowledgements, or at a random time.
	killAt := 1 + rng.IntN(300)
	if rng.IntN(3) == 0 {
		killAt = -1
		timer := time.AfterFunc(time.Duration(rng.IntN(300))*time.Millisecond, kill)
		defer timer.Stop()
	}
	var lines []string
	acks := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() { // until the child dies and the pipe is closed
		line := sc.Text()
		if strings.HasPrefix(line, "do ") || strings.HasPrefix(line, "ack ") {
			lines = append(lines, line)
		}
		if strings.HasPrefix(line, "ack ") {
			if acks++; acks == killAt {
				kill()
			}
		}
	}
	require.NoError(t, sc.Err())
	kill() // in case the child ended by itself
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended by itself (%v):\n%s\n%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	return lines
}

// crashDomain is what the acknowledgements say of one domain.
type crashDomain struct {
	held      bool
	offset    int64
	token     worklease.Token // the zero token: not known (the grant was in flight)
	retries   int
	backlog   []int64
	processed map[int64]bool
	failed    map[int64]bool
	enqueued  map[int64]bool // offsets queued with Enqueue, which have payloads
}

func (d *crashDomain) clone() *crashDomain {
	c := *d
	c.backlog = slices.Clone(d.backlog)
	c.processed = maps.Clone(d.processed)
	c.failed = maps.Clone(d.failed)
	c.enqueued = maps.Clone(d.enqueued)
	return &c
}

// crashModel is what the acknowledgements say of every domain.
type crashModel struct {
	domains map[string]*crashDomain
	acks    int
}

func newCrashModel() *crashModel {
	m := &crashModel{domains: map[string]*crashDomain{}}
	for _, d := range crashChildDomains {
		m.domains[d] = &crashDomain{processed: map[int64]bool{}, failed: map[int64]bool{}, enqueued: map[int64]bool{}}
	}
	return m
}

// applyLines applies the child's acknowledgements and returns the "do" line
// of the call in flight when it died, or "".
func (m *crashModel) applyLines(t *testing.T, lines []string) (inflight string) {
	t.Helper()
	for _, line := range lines {
		if strings.HasPrefix(line, "do ") {
			require.Empty(t, inflight, "a call begins before the one before it is acknowledged")
			inflight = line
			continue
		}
		require.NotEmpty(t, inflight, "an acknowledgement of no call: %q", line)
		f := strings.Fields(line)
		d := m.domains[f[2]]
		require.NotNil(t, d, line)
		require.NoError(t, d.apply(f[1], f[3:]), line)
		m.acks++
		inflight = ""
	}
	return inflight
}

// apply applies one acknowledgement, or one the call in flight may have
// taken effect as: "lease" with the token "*" for a grant whose token is not
// known.
func (d *crashDomain) apply(kind string, args []string) error {
	off, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		return err
	}
	switch kind {
	case "lease":
		if d.held {
			return errors.New("a grant while a lease is held")
		}
		var tok worklease.Token
		if args[1] != "*" {
			if tok, err = worklease.ParseToken(args[1]); err != nil {
				return err
			}
		}
		retries, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		d.held, d.offset, d.token, d.retries = true, off, tok, retries
		d.backlog = slices.DeleteFunc(d.backlog, func(x int64) bool { return x == off })
	case "processed":
		if !d.held || d.offset != off {
			return errors.New("processes an offset that is not held")
		}
		d.held = false
		d.processed[off] = true
	case "retry":
		if !d.held || d.offset != off {
			return errors.New("retries an offset that is not held")
		}
		if d.retries, err = strconv.Atoi(args[1]); err != nil {
			return err
		}
	case "failed":
		if d.held && d.offset == off {
			d.held = false
		}
		d.backlog = slices.DeleteFunc(d.backlog, func(x int64) bool { return x == off })
		d.failed[off] = true
	case "queued":
		d.backlog = append(d.backlog, off)
		d.enqueued[off] = true
	default:
		return fmt.Errorf("unknown acknowledgement %q", kind)
	}
	return nil
}

// outcomes returns the states the call in flight, described by its "do"
// line, may have left d in, d's current state first: nothing happened, or the
// call took effect as one of its possible answers.
func (d *crashDomain) outcomes(t *testing.T, do []string) []*crashDomain {
	out := []*crashDomain{d}
	var acks [][]string
	switch off := do[3]; do[1] {
	case "acquire": // a first grant: no retries yet
		acks = append(acks, []string{"lease", off, "*", "0"})
	case "enqueue":
		acks = append(acks, []string{"queued", off})
	case "succeed":
		acks = append(acks, []string{"processed", off})
	case "fail":
		acks = append(acks, []string{"retry", off, strconv.Itoa(d.retries + 1)}, []string{"failed", off})
	case "kill":
		acks = append(acks, []string{"failed", off})
	default:
		t.Fatalf("unknown call %q", do)
	}
	for _, a := range acks {
		c := d.clone()
		require.NoError(t, c.apply(a[0], a[1:]), "the call in flight, %q, as %q", do, a)
		out = append(out, c)
	}
	return out
}

// matches reports whether the recovered domain, as Inspect and DeadLetters
// show it, is d, apart from the processed offsets, of which only the count is
// compared. A lease whose token d does not know matches any token.
func (d *crashDomain) matches(info worklease.DomainInfo, failed []int64) bool {
	if info.Leased != d.held || info.Paused || !slices.Equal(info.Backlog, d.backlog) ||
		info.Processed != int64(len(d.processed)) || info.Failed != int64(len(d.failed)) ||
		!slices.Equal(failed, slices.Sorted(maps.Keys(d.failed))) {
		return false
	}
	if d.held {
		l := info.Lease
		return l.Offset == d.offset && l.RetryCount == d.retries && (d.token.IsZero() || l.Token == d.token)
	}
	return true
}

func (d *crashDomain) String() string {
	return fmt.Sprintf("held=%v offset=%d token=%v retries=%d backlog=%v processed=%d failed=%v",
		d.held, d.offset, d.token, d.retries, d.backlog, len(d.processed), slices.Sorted(maps.Keys(d.failed)))
}

// verify reopens dir and checks every domain against the model, the domain
// of the call in flight against each way it may have ended; then it makes
// the model what was found, for the next child to build on.
// It reports whether the call in flight took effect, and the log's Stats.
func (m *crashModel) verify(t *testing.T, dir string, inflight string) (took bool, st wal.Stats) {
	t.Helper()
	j, err := wal.Open(dir)
	require.NoError(t, err)
	st = j.Stats()
	mgr, err := worklease.New(worklease.WithJournal(j), worklease.WithMaxRetries(1))
	if err != nil {
		_ = j.Close()
	}
	require.NoError(t, err, "replay after the kill")
	defer func() { require.NoError(t, mgr.Close()) }()

	do := strings.Fields(inflight)
	for _, name := range crashChildDomains {
		d := m.domains[name]
		candidates := []*crashDomain{d}
		if len(do) > 2 && do[2] == name {
			candidates = d.outcomes(t, do)
		}
		info, err := mgr.Inspect(name)
		require.NoError(t, err)
		letters, err := mgr.DeadLetters(name)
		require.NoError(t, err)
		var failed []int64
		for _, dl := range letters {
			failed = append(failed, dl.Offset)
		}
		var found *crashDomain
		for i, c := range candidates {
			if c.matches(info, failed) {
				found, took = c, took || i > 0
				break
			}
		}
		if found == nil {
			var b strings.Builder
			fmt.Fprintf(&b, "domain %s after the kill (call in flight: %q):\nrecovered: %+v, failed %v\n", name, inflight, info, failed)
			for _, c := range candidates {
				fmt.Fprintf(&b, "allowed:   %v\n", c)
			}
			t.Fatal(b.String())
		}
		// The count matched; every processed offset is there.
		for off := range found.processed {
			res, err := mgr.TryAcquire(name, off)
			require.NoError(t, err)
			require.Equal(t, worklease.AlreadyProcessed, res.Status, "domain %s, offset %d was acknowledged processed", name, off)
		}
		// Every offset the domain holds has its payload, byte for byte;
		// a processed one has none left.
		held := slices.Concat(info.Backlog, failed)
		if info.Leased {
			held = append(held, info.Lease.Offset)
		}
		for _, off := range held {
			var want []byte
			if found.enqueued[off] {
				want = crashPayload(name, off)
			}
			got, err := mgr.Payload(name, off)
			require.NoError(t, err)
			require.Equal(t, want, got, "domain %s, offset %d: the payload after the kill", name, off)
		}
		for off := range found.processed {
			got, err := mgr.Payload(name, off)
			require.NoError(t, err)
			require.Nil(t, got, "domain %s, offset %d was processed: its payload is gone", name, off)
		}
		if found.held && found.token.IsZero() {
			found.token = info.Lease.Token // granted by the call in flight
		}
		m.domains[name] = found
	}
	return took, st
}
