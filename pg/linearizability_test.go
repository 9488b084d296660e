package pg_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// The linearizability test records concurrent histories of the contract's
// calls, made by several clients in two processes, each process with a
// Manager of its own (and each client on a connection of its own), on a
// few domains, each
// call with the moments it was made and answered, and has porcupine check
// that some order of the calls, one at a time, each between its moments,
// is one the contract allows: lzModel, a sequential model of a domain.
// Domains are independent (every call but an empty Claim is about one),
// so porcupine checks each domain's calls on its own.
//
// The model leaves out what the conformance suite's sequential model
// checks alone: lease TTLs (read against the database's clock, which the
// clients do not share), pauses, payloads, attempts and retry counts,
// events, and which ready domain a Claim takes first. A Claim that claims
// nothing is allowed in any state, since a claim passes over the domains
// other calls hold as it looks.

// The shape of a history.
const (
	lzClients    = 4
	lzCalls      = 60 // by each client
	lzOffsets    = 8  // offsets 0 to 7, so that calls collide
	lzMaxRetries = 1  // so that failures reach the dead letters
)

var lzDomains = []string{"a", "b", "c"}

// The calls of a history.
type lzOp uint8

const (
	lzTryAcquire lzOp = iota + 1
	lzEnqueue
	lzClaim
	lzSucceed
	lzFail
	lzRetry
)

func (op lzOp) String() string {
	return [...]string{"?", "TryAcquire", "Enqueue", "Claim", "Succeed", "Fail", "Retry"}[op]
}

// An lzInput is a call: the domain and offset of TryAcquire and Enqueue;
// the domain and the fence of the token of Succeed, Fail and Retry (a
// token of the domain, so the fence tells it from the domain's others).
type lzInput struct {
	op     lzOp
	domain string
	offset int64
	fence  uint64
}

// An lzOutput is a call's answer: a status (an AcquireStatus, a
// SucceedStatus or a FailStatus; for Retry, 1 retried or 2 dead-lettered),
// the offset it hints at or was claimed, and the fence of the lease it
// granted or reports; or the contract's error. A Claim that granted
// nothing has no domain.
type lzOutput struct {
	status   int
	domain   string // Claim's
	offset   int64  // a hint's, a Claim's, or a BacklogOrderError's expected offset
	hasNext  bool
	fence    uint64
	err      error // ErrNoLease, ErrTokenMismatch or ErrBacklogOrder
	rejected bool  // err is set
}

// An lzState is a domain as the contract describes it (no lease TTL, FIFO
// order, lzMaxRetries retries). It is a value: a step returns a new one.
type lzState struct {
	fence     uint64 // the latest fence granted; each grant's is larger
	leased    bool
	offset    int64  // the lease's
	held      uint64 // the fence of the lease's token
	retries   int    // the lease's failed attempts so far
	backlog   string // the queued offsets, head first, a byte each
	carried   string // the failed attempts each queued offset carries to its next grant, a byte each
	processed uint8  // a bit per offset
	failed    uint8  // dead-lettered, a bit per offset
}

func (s lzState) has(set uint8, off int64) bool { return set&(1<<off) != 0 }

func (s lzState) queued(off int64) bool { return strings.IndexByte(s.backlog, byte(off)) >= 0 }

func (s lzState) head() (int64, bool) {
	if s.backlog == "" {
		return 0, false
	}
	return int64(s.backlog[0]), true
}

// grant leases the backlog's head, or off if the backlog is empty, under
// fence, if fence is above every fence before.
func (s lzState) grant(off int64, fence uint64) (bool, lzState) {
	if fence <= s.fence {
		return false, s
	}
	s.retries = 0
	if head, ok := s.head(); ok {
		if head != off {
			return false, s
		}
		s.retries = int(s.carried[0])
		s.backlog, s.carried = s.backlog[1:], s.carried[1:]
	}
	s.fence, s.held, s.leased, s.offset = fence, fence, true, off
	return true, s
}

// check is the token check of Succeed, Fail and Retry.
func (s lzState) check(fence uint64) error {
	switch {
	case s.leased && fence == s.held:
		return nil
	case !s.leased:
		return worklease.ErrNoLease
	}
	return worklease.ErrTokenMismatch
}

// hint is the answer's hint after a lease ended: the backlog's head.
func (s lzState) hint(out lzOutput) bool {
	head, ok := s.head()
	return out.hasNext == ok && (!ok || out.offset == head)
}

// deadLetter ends the lease with its offset failed.
func (s lzState) deadLetter() lzState {
	s.failed |= 1 << s.offset
	s.leased = false
	return s
}

// lzStep is the model's step: whether the call could have been answered so
// in state s, and the state after it.
func lzStep(s lzState, in lzInput, out lzOutput) (bool, lzState) {
	switch in.op {
	case lzTryAcquire, lzEnqueue:
		switch {
		case s.has(s.processed, in.offset):
			return !out.rejected && out.status == int(worklease.AlreadyProcessed), s
		case s.has(s.failed, in.offset):
			return !out.rejected && out.status == int(worklease.AlreadyFailed), s
		case s.leased && in.offset == s.offset:
			return !out.rejected && out.status == int(worklease.AlreadyAcquired) && (in.op == lzEnqueue || out.fence == s.held), s
		case s.leased || in.op == lzEnqueue:
			if s.queued(in.offset) {
				// Enqueue says the offset was queued already; TryAcquire
				// answers Enqueued, as it always has.
				want := worklease.Enqueued
				if in.op == lzEnqueue {
					want = worklease.AlreadyQueued
				}
				return !out.rejected && out.status == int(want), s
			}
			s.backlog, s.carried = s.backlog+string(byte(in.offset)), s.carried+"\x00"
			return !out.rejected && out.status == int(worklease.Enqueued), s
		}
		// TryAcquire on an idle domain grants its head, or the offset if
		// nothing is queued, and refuses any other, changing nothing.
		if head, ok := s.head(); ok && head != in.offset {
			return out.rejected && errors.Is(out.err, worklease.ErrBacklogOrder) && out.offset == head, s
		}
		if out.rejected || out.status != int(worklease.Acquired) {
			return false, s
		}
		return s.grant(in.offset, out.fence)
	case lzClaim:
		if out.domain == "" {
			// A claim passes over the domains other calls hold as it
			// looks: one that claimed nothing says nothing.
			return true, s
		}
		head, ok := s.head()
		if s.leased || !ok || out.offset != head {
			return false, s
		}
		return s.grant(head, out.fence)
	}
	// Succeed, Fail and Retry.
	if err := s.check(in.fence); err != nil {
		return out.rejected && errors.Is(out.err, err), s
	}
	if out.rejected {
		return false, s
	}
	switch in.op {
	case lzSucceed:
		s.processed |= 1 << s.offset
		s.leased = false
		want := worklease.NoBacklog
		if s.backlog != "" {
			want = worklease.NextHint
		}
		return out.status == int(want) && s.hint(out), s
	case lzFail:
		if s.retries < lzMaxRetries {
			s.retries++ // the holder keeps the lease for its next attempt
			return out.status == int(worklease.RetryScheduled), s
		}
		s = s.deadLetter()
		want := worklease.GiveUpNoBacklog
		if s.backlog != "" {
			want = worklease.GiveUpNextHint
		}
		return out.status == int(want) && s.hint(out), s
	default: // Retry
		if s.retries < lzMaxRetries {
			// The offset waits at the front of the line, for any claim.
			s.backlog, s.carried = string(byte(s.offset))+s.backlog, string(byte(s.retries+1))+s.carried
			s.leased = false
			return out.status == 1, s
		}
		return out.status == 2, s.deadLetter()
	}
}

// lzModel is the contract of one domain, for porcupine.
var lzModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byDomain := make(map[string][]porcupine.Operation)
		for _, op := range history {
			d := op.Input.(lzInput).domain
			if d == "" {
				d = op.Output.(lzOutput).domain
			}
			if d == "" {
				continue // a Claim that claimed nothing (see lzStep)
			}
			byDomain[d] = append(byDomain[d], op)
		}
		var out [][]porcupine.Operation
		for _, d := range lzDomains {
			out = append(out, byDomain[d])
		}
		return out
	},
	Init: func() any { return lzState{} },
	Step: func(state, input, output any) (bool, any) {
		return lzStep(state.(lzState), input.(lzInput), output.(lzOutput))
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lzInput), output.(lzOutput)
		call := fmt.Sprintf("%v(%s, %d)", in.op, in.domain, in.offset)
		switch in.op {
		case lzClaim:
			call = "Claim()"
		case lzSucceed, lzFail, lzRetry:
			call = fmt.Sprintf("%v(%s, fence %d)", in.op, in.domain, in.fence)
		}
		if out.rejected {
			return fmt.Sprintf("%s -> %v (%d)", call, out.err, out.offset)
		}
		return fmt.Sprintf("%s -> status %d, %s/%d, next %v, fence %d", call, out.status, out.domain, out.offset, out.hasNext, out.fence)
	},
	DescribeState: func(state any) string {
		s := state.(lzState)
		return fmt.Sprintf("%+v", s)
	},
}

// lzClient is one client of a history: it makes lzCalls calls at random
// through b, keeping the tokens it was answered with, per domain, and
// sometimes passing one that is no longer the holder's.
func lzClient(ctx context.Context, b worklease.Backend, id int, rng *rand.Rand) ([]porcupine.Operation, error) {
	tokens := make(map[string][]worklease.Token)
	var ops []porcupine.Operation
	for len(ops) < lzCalls {
		in := lzInput{op: lzOp(1 + rng.IntN(6)), domain: lzDomains[rng.IntN(len(lzDomains))], offset: int64(rng.IntN(lzOffsets))}
		var tok worklease.Token
		switch in.op {
		case lzClaim:
			in.domain, in.offset = "", 0
		case lzSucceed, lzFail, lzRetry:
			held := tokens[in.domain]
			if len(held) == 0 {
				continue
			}
			tok = held[len(held)-1]
			if rng.IntN(4) == 0 {
				tok = held[rng.IntN(len(held))] // perhaps a stale one
			}
			in.offset, in.fence = 0, tok.Fence()
		}
		var out lzOutput
		var err error
		call := lzNow()
		switch in.op {
		case lzTryAcquire:
			var res worklease.AcquireResult
			res, err = b.TryAcquire(ctx, in.domain, in.offset)
			out.status, out.fence = int(res.Status), res.Token.Fence()
			if res.Status == worklease.Acquired || res.Status == worklease.AlreadyAcquired {
				tokens[in.domain] = append(tokens[in.domain], res.Token)
			}
		case lzEnqueue:
			var st worklease.AcquireStatus
			st, err = b.Enqueue(ctx, in.domain, in.offset, nil)
			out.status = int(st)
		case lzClaim:
			var claims []worklease.Claim
			claims, err = b.Claim(ctx, 1)
			if len(claims) == 1 {
				c := claims[0]
				out.domain, out.offset, out.fence = c.Domain, c.Offset, c.Token.Fence()
				tokens[c.Domain] = append(tokens[c.Domain], c.Token)
			}
		case lzSucceed:
			var res worklease.SucceedResult
			res, err = b.Succeed(ctx, in.domain, tok)
			out.status, out.offset, out.hasNext = int(res.Status), res.Next, res.Status == worklease.NextHint
		case lzFail:
			var res worklease.FailResult
			res, err = b.Fail(ctx, in.domain, tok, errors.New("failed"))
			out.status, out.offset, out.hasNext = int(res.Status), res.Next, res.Status == worklease.GiveUpNextHint
		case lzRetry:
			var res worklease.RetryResult
			res, err = b.Retry(ctx, in.domain, tok, errors.New("failed"), 0)
			out.status = 1
			if res.DeadLettered {
				out.status = 2
			}
		}
		ret := lzNow()
		var order *worklease.BacklogOrderError
		switch {
		case errors.As(err, &order):
			out = lzOutput{err: err, rejected: true, offset: order.Expected}
		case errors.Is(err, worklease.ErrNoLease), errors.Is(err, worklease.ErrTokenMismatch):
			out = lzOutput{err: err, rejected: true}
		case err != nil:
			return nil, fmt.Errorf("client %d: %v: %w", id, in.op, err)
		}
		ops = append(ops, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
	}
	return ops, nil
}

// lzNow is the moment of a call's making or answer, in nanoseconds: the
// machine's clock, which the processes of a history share.
func lzNow() int64 { return time.Now().UnixNano() }

// lzHistory records a history of lzClients clients on one schema, half of
// them in this process on a Manager of its own and half in another
// process, and checks it. With broken, both Managers grant over held
// leases (GrantOverLeases).
func lzHistory(t *testing.T, seed uint64, broken bool) porcupine.CheckResult {
	pool := testPool(t)
	m, schema := newManager(t, pool, worklease.WithMaxRetries(lzMaxRetries))
	if broken {
		pg.GrantOverLeases(m)
	}
	ctx := context.Background()
	child := startLinearizableChild(t, schema, seed, broken)
	select { // the clients of both processes start together
	case <-child.ready:
	case <-child.read:
	}
	history, err := lzRun(ctx, m, 0, lzClientsHere, seed)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := child.wait()
	if err != nil {
		t.Fatal(err)
	}
	history = append(history, theirs...)
	t.Logf("history %d: %s", seed, lzSummary(history))
	// The bound is for a failure: a history this small is decided in
	// milliseconds.
	res, info := porcupine.CheckOperationsVerbose(lzModel, history, time.Minute)
	if res == porcupine.Illegal && !broken {
		if f, err := os.CreateTemp("", "worklease-linearizability-*.html"); err == nil {
			if porcupine.Visualize(lzModel, info, f) == nil {
				t.Logf("the history, drawn: %s", f.Name())
			}
			f.Close()
		}
	}
	return res
}

// lzClientsHere is how many of a history's clients run in the test's own
// process; the others run in a child process.
const lzClientsHere = lzClients / 2

// lzRun runs n clients at once on b, numbered from first, and returns
// their calls.
func lzRun(ctx context.Context, b worklease.Backend, first, n int, seed uint64) ([]porcupine.Operation, error) {
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for id := first; id < first+n; id++ {
		wg.Go(func() {
			ops, err := lzClient(ctx, b, id, rand.New(rand.NewPCG(seed, uint64(id))))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			history = append(history, ops...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return history, errors.Join(all...)
}

// An lzRecord is a call of a child process's client, as it sends it.
type lzRecord struct {
	Client       int
	Op           lzOp
	Domain       string
	Offset       int64
	Fence        uint64
	Status       int
	OutDomain    string
	OutOffset    int64
	HasNext      bool
	OutFence     uint64
	Err          string // "", "order", "none" or "mismatch"
	Call, Return int64
}

// lzErrors are the contract's errors a call may be answered with, by the
// names lzRecord gives them.
var lzErrors = map[string]error{
	"order": worklease.ErrBacklogOrder, "none": worklease.ErrNoLease, "mismatch": worklease.ErrTokenMismatch,
}

func lzEncode(op porcupine.Operation) lzRecord {
	in, out := op.Input.(lzInput), op.Output.(lzOutput)
	r := lzRecord{Client: op.ClientId, Op: in.op, Domain: in.domain, Offset: in.offset, Fence: in.fence,
		Status: out.status, OutDomain: out.domain, OutOffset: out.offset, HasNext: out.hasNext, OutFence: out.fence,
		Call: op.Call, Return: op.Return}
	for name, err := range lzErrors {
		if out.rejected && errors.Is(out.err, err) {
			r.Err = name
		}
	}
	return r
}

func lzDecode(r lzRecord) porcupine.Operation {
	out := lzOutput{status: r.Status, domain: r.OutDomain, offset: r.OutOffset, hasNext: r.HasNext, fence: r.OutFence}
	if r.Err != "" {
		out.err, out.rejected = lzErrors[r.Err], true
	}
	return porcupine.Operation{ClientId: r.Client, Input: lzInput{op: r.Op, domain: r.Domain, offset: r.Offset, fence: r.Fence},
		Call: r.Call, Output: out, Return: r.Return}
}

// The variables a linearizability child process reads, besides the
// schema (childSchema).
const (
	lzSeedVar   = "WORKLEASE_PG_LZ_SEED"
	lzBrokenVar = "WORKLEASE_PG_LZ_BROKEN"
)

// An lzChild is the child process of a history.
type lzChild struct {
	cmd   *exec.Cmd
	ops   []porcupine.Operation
	err   error
	ready chan struct{} // closed once its clients start
	read  chan struct{} // closed once its output is read
}

// startLinearizableChild starts the process that runs a history's other
// clients.
func startLinearizableChild(t *testing.T, schema string, seed uint64, broken bool) *lzChild {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childRole+"=linearizable", childSchema+"="+schema,
		lzSeedVar+"="+strconv.FormatUint(seed, 10), lzBrokenVar+"="+strconv.FormatBool(broken))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &lzChild{cmd: cmd, ready: make(chan struct{}), read: make(chan struct{})}
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Bytes()
			if string(line) == "ready" {
				close(c.ready)
				continue
			}
			if !bytes.HasPrefix(line, []byte("{")) {
				t.Logf("child: %s", line) // the child test's own output
				continue
			}
			var r lzRecord
			if err := json.Unmarshal(line, &r); err != nil {
				c.err = fmt.Errorf("child: %q: %w", line, err)
				continue
			}
			c.ops = append(c.ops, lzDecode(r))
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-c.read
			_ = cmd.Wait()
		}
	})
	return c
}

// wait waits for the child process and returns its clients' calls.
func (c *lzChild) wait() ([]porcupine.Operation, error) {
	<-c.read
	if err := c.cmd.Wait(); err != nil {
		return nil, fmt.Errorf("child process: %w", err)
	}
	if c.err == nil && len(c.ops) != (lzClients-lzClientsHere)*lzCalls {
		c.err = fmt.Errorf("child process: %d calls, want %d", len(c.ops), (lzClients-lzClientsHere)*lzCalls)
	}
	return c.ops, c.err
}

// childLinearizable is the child process of a history: it runs the
// history's clients from lzClientsHere on, on a Manager of its own, and
// writes their calls to its output, one JSON record a line.
func childLinearizable(t *testing.T, pool *pgxpool.Pool, schema string) {
	seed, err := strconv.ParseUint(os.Getenv(lzSeedVar), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := pg.OpenSchema(ctx, pool, schema, worklease.WithMaxRetries(lzMaxRetries))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if os.Getenv(lzBrokenVar) == "true" {
		pg.GrantOverLeases(m)
	}
	fmt.Println("ready")
	ops, err := lzRun(ctx, m, lzClientsHere, lzClients-lzClientsHere, seed)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, op := range ops {
		if err := enc.Encode(lzEncode(op)); err != nil {
			t.Fatal(err)
		}
	}
}

// The PostgreSQL backend's calls, made concurrently from several
// connections of two Managers, are linearizable: porcupine finds, for
// each history, an order of the calls that the contract's model allows.
func TestLinearizable(t *testing.T) {
	for seed := range uint64(3) {
		if res := lzHistory(t, seed, false); res != porcupine.Ok {
			t.Fatalf("history %d: %v; want Ok", seed, res)
		}
	}
}

// A backend whose grant does not check the domain's lease, so that a
// TryAcquire of another offset is granted while a lease is held, is
// caught: some history of a few is not linearizable.
func TestLinearizableCatchesBrokenGrant(t *testing.T) {
	for seed := range uint64(5) {
		if res := lzHistory(t, seed, true); res == porcupine.Illegal {
			return
		}
	}
	t.Fatal("five histories of a backend that grants over held leases passed the check")
}

// lzSummary counts a history's calls by kind and outcome.
func lzSummary(history []porcupine.Operation) string {
	counts := make(map[string]int)
	overlapping, across := 0, 0 // calls that overlap another's; another process's
	for i, op := range history {
		in, out := op.Input.(lzInput), op.Output.(lzOutput)
		key := in.op.String()
		switch {
		case out.rejected:
			key += " refused"
		case in.op == lzClaim && out.domain == "":
			key += " empty"
		case in.op == lzTryAcquire:
			key += " " + worklease.AcquireStatus(out.status).String()
		}
		counts[key]++
		overlaps, crosses := false, false
		for j, other := range history {
			if j != i && other.Call <= op.Return && op.Call <= other.Return {
				overlaps = true
				crosses = crosses || (op.ClientId < lzClientsHere) != (other.ClientId < lzClientsHere)
			}
		}
		if overlaps {
			overlapping++
		}
		if crosses {
			across++
		}
	}
	return fmt.Sprintf("%d calls, %d overlapping another, %d another process's; %v", len(history), overlapping, across, counts)
}
