package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// TestMain makes the test binary the child when the parent re-executes it
// (TestChildProcess), as main does for the program.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(childEnv); ok {
		os.Exit(childMain(spec, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// smallConfig is a workload of 2 domains with 6 offsets each: 27
// acknowledgements in all (the slow job; 5 offsets acquired and processed;
// one acquired, retried and dead-lettered, per domain).
func smallConfig(t *testing.T) config {
	cfg := defaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "journal")
	cfg.Domains, cfg.Offsets, cfg.Acks = 2, 6, 10
	cfg.Pace = 0
	cfg.Quiet = true
	return cfg
}

const smallTotal = 27

func TestSimulate(t *testing.T) {
	cfg := smallConfig(t)
	cfg.Simulate, cfg.Quiet = true, false
	var out bytes.Buffer
	sum, err := run(t.Context(), cfg, &out, io.Discard)
	require.NoError(t, err, out.String())
	assert.Equal(t, "simulated", sum.Crash)
	assert.True(t, sum.Killed)
	assert.Equal(t, 10, sum.Acks)
	assert.Equal(t, 10, sum.Found)
	assert.Zero(t, sum.Lost)
	assert.Zero(t, sum.Unacked, "a simulated crash falls between two calls")
	assert.Positive(t, sum.Held, "the slow job at least")
	assert.True(t, sum.FinishedOK)
	assert.Equal(t, int64(2*5+1), sum.Processed)
	assert.Equal(t, int64(2), sum.Dead)
	s := out.String()
	assert.Contains(t, s, "crash: the Manager and its log are abandoned")
	assert.Contains(t, s, "ok  slow/0 still leased under token")
	assert.Contains(t, s, "then its holder: succeed slow/0 with that token")
	assert.Contains(t, s, "verified: nothing acknowledged was lost")
	assert.Contains(t, s, "worklease-wal verify "+cfg.Dir)
}

// TestSimulateEveryCrashPoint crashes after every possible number of
// acknowledgements, and once after the work is done.
func TestSimulateEveryCrashPoint(t *testing.T) {
	for acks := 1; acks <= smallTotal+1; acks++ {
		cfg := smallConfig(t)
		cfg.Simulate, cfg.Acks = true, acks
		cfg.sync = wal.SyncInterval(time.Hour) // Wait writes to the OS, which a process crash keeps, and never fsyncs: the test is quick
		var out bytes.Buffer
		sum, err := run(t.Context(), cfg, &out, io.Discard)
		require.NoError(t, err, "acks %d", acks)
		assert.Equal(t, min(acks, smallTotal), sum.Acks, "acks %d", acks)
		assert.Equal(t, sum.Acks, sum.Found, "acks %d", acks)
		assert.Zero(t, sum.Lost, "acks %d", acks)
		assert.True(t, sum.FinishedOK, "acks %d: %s", acks, out.String())
		assert.Equal(t, acks <= smallTotal, sum.Killed, "acks %d", acks)
		if acks > smallTotal {
			assert.Contains(t, out.String(), "the worker finished the whole workload before the crash")
		}
	}
}

// TestChildProcess runs the real thing once: a child process, killed with
// SIGKILL.
func TestChildProcess(t *testing.T) {
	if runtime.GOOS == "windows" || !canExec() {
		t.Skip("the child-process path is tested on Unix")
	}
	cfg := smallConfig(t)
	cfg.Domains, cfg.Offsets, cfg.Acks = 3, 10, 12
	cfg.Pace = defaultConfig().Pace // time for the kill to land mid-way
	cfg.Quiet = false
	var out, errOut bytes.Buffer
	sum, err := run(t.Context(), cfg, &out, &errOut)
	require.NoError(t, err, "%s\n%s", out.String(), errOut.String())
	assert.Empty(t, errOut.String())
	assert.Equal(t, "SIGKILL", sum.Crash)
	assert.True(t, sum.Killed, out.String())
	assert.GreaterOrEqual(t, sum.Acks, 12)
	assert.Equal(t, sum.Acks, sum.Found)
	assert.Zero(t, sum.Lost, out.String())
	assert.Positive(t, sum.Held)
	assert.True(t, sum.FinishedOK, out.String())
	s := out.String()
	assert.Contains(t, s, "phase 1: child process ")
	assert.Contains(t, s, "signal: killed")
	assert.Contains(t, s, "verified: nothing acknowledged was lost")
}

func TestRealMain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "j")
	var out, errOut bytes.Buffer
	code := realMain([]string{"-simulate", "-quiet", "-domains", "2", "-offsets", "4", "-acks", "5", "-dir", dir}, &out, &errOut)
	require.Equal(t, 0, code, "%s\n%s", out.String(), errOut.String())
	assert.Contains(t, out.String(), "verified: nothing acknowledged was lost")
	assert.NotContains(t, out.String(), "ack ", "-quiet")
	assert.DirExists(t, dir, "-dir is kept")

	// The journal the run leaves is whole: it replays into a Manager with
	// every domain idle.
	l, err := wal.Open(dir, wal.WithReadOnly())
	require.NoError(t, err)
	m, err := worklease.New(worklease.WithJournal(l))
	require.NoError(t, err)
	leases, err := m.Leases()
	require.NoError(t, err)
	assert.Empty(t, leases)
	require.NoError(t, m.Close())

	// A directory that is not empty is refused.
	out.Reset()
	errOut.Reset()
	code = realMain([]string{"-simulate", "-dir", dir}, &out, &errOut)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut.String(), "is not empty")
}

func TestUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "Usage: durable [flags]"},
		{[]string{"-acks", "0"}, 2, "-acks 0: must be at least 1"},
		{[]string{"-offsets", "0"}, 2, "must be at least 1"},
		{[]string{"-pace", "-1s"}, 2, "must not be negative"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"-nope"}, 2, "flag provided but not defined"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, tt.code, realMain(tt.args, &out, &errOut), tt.args)
		assert.Contains(t, errOut.String(), tt.want, tt.args)
		assert.Empty(t, out.String(), tt.args)
	}
}

// TestCheckDetectsLoss feeds check acknowledgements the Manager does not
// have, to show it is not vacuous. A loss counts every acknowledgement of
// its offset.
func TestCheckDetectsLoss(t *testing.T) {
	m, err := worklease.New(worklease.WithMaxRetries(1))
	require.NoError(t, err)
	w := workload{Domains: 2, Offsets: 6}
	var acks []ack
	wk := &worker{m: m, w: w, emit: func(a ack) bool {
		acks = append(acks, a)
		return len(acks) < 15
	}}
	require.ErrorIs(t, wk.run(), errCrash)
	// 15 acknowledgements: slow/0 acquired; d0/0 and d1/0 acquired and
	// processed; d0/1 and d1/1 acquired, retried and dead; d0/2 and d1/2
	// acquired and processed.
	require.Len(t, acks, 15)
	acks = append(acks,
		ack{Op: opSucceed, Domain: "d0", Offset: 99},                                         // never processed
		ack{Op: opAcquire, Domain: "d9", Offset: 0, Token: "1-1-0000000000000001"},           // a lease never granted
		ack{Op: opRetry, Domain: "d8", Offset: 3, Token: "1-1-0000000000000001", Retries: 1}, // the same
		ack{Op: opDead, Domain: "d7", Offset: 1, Attempts: 2, Cause: cause("d7", 1, 2)},      // never failed
		ack{Op: opDead, Domain: "d1", Offset: 1, Attempts: 2, Cause: "a different cause"},    // a cause changed: d1/1's 3 real ones count too
		ack{Op: opAcquire, Domain: "slow", Offset: 0, Token: "9-9-0000000000000009"},         // another token: slow/0's real one counts too
	)
	var sum summary
	var out bytes.Buffer
	require.NoError(t, check(m, w, acks, &sum, &out))
	assert.Equal(t, 15-3-1, sum.Found, out.String())
	assert.Equal(t, 4+4+2, sum.Lost, out.String())
	assert.Equal(t, 6, strings.Count(out.String(), "LOST "), out.String())
	require.NoError(t, m.Close())
}

func TestWorkerResumes(t *testing.T) {
	// A worker stopped anywhere and a new one on the same Manager finish
	// the workload exactly.
	for stop := 1; stop <= smallTotal; stop++ {
		m, err := worklease.New(worklease.WithMaxRetries(1))
		require.NoError(t, err)
		w := workload{Domains: 2, Offsets: 6}
		n := 0
		first := &worker{m: m, w: w, emit: func(ack) bool { n++; return n < stop }}
		require.ErrorIs(t, first.run(), errCrash)
		second := &worker{m: m, w: w, emit: func(ack) bool { return true }}
		require.NoError(t, second.run())
		// Only the slow job is left; its holder finishes it.
		info, err := m.Inspect(slowDomain)
		require.NoError(t, err)
		require.True(t, info.Leased)
		_, err = m.Succeed(slowDomain, info.Lease.Token)
		require.NoError(t, err)
		var sum summary
		require.NoError(t, checkFinal(m, w, &sum), "stop %d", stop)
		require.NoError(t, m.Close())
	}
}
