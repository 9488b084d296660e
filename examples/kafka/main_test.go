package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The in-process cluster, the clients and the pool all stop before a run
// returns: goleak finds none of their goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// smallConfig is a run that takes a fraction of a second, even under -race.
func smallConfig() config {
	cfg := defaultConfig()
	cfg.Keys, cfg.Records, cfg.Workers, cfg.QueueLimit = 50, 2000, 16, 200
	cfg.FailRate, cfg.Seed = 0.1, 42
	cfg.Work = 100 * time.Microsecond
	cfg.Commit = 5 * time.Millisecond
	cfg.Progress = 20 * time.Millisecond
	return cfg
}

func TestRun(t *testing.T) {
	cfg := smallConfig()
	var out bytes.Buffer
	sum, err := run(t.Context(), cfg, &out)
	require.NoError(t, err)

	assert.True(t, sum.Verified)
	o := sum.Outcome
	assert.Zero(t, o.OrderViolations)
	assert.Zero(t, o.CommitViolations)
	assert.Equal(t, cfg.Keys, o.Keys)
	assert.Equal(t, cfg.Records, o.Records)
	assert.Equal(t, int64(cfg.Records), sum.Produced)
	assert.Equal(t, uint64(cfg.Records), sum.Processed+sum.DeadLettered, "every record finished once")
	assert.Positive(t, sum.Retries, "a 10%% fail rate must cause retries")
	assert.Greater(t, o.Commits, 1, "commits while records run, not only at the end")
	assert.Equal(t, 4, sum.Partitions)
	assert.Contains(t, out.String(), `kafka: 2000 records over 50 keys, topic "worklease-example" (4 partitions, in-process cluster), group "worklease-example-`)
	assert.Contains(t, out.String(), "committed", "progress lines")

	var s bytes.Buffer
	sum.print(&s)
	assert.Contains(t, s.String(), "per-key order        verified: yes (50 keys")
	assert.Contains(t, s.String(), "commits              verified: yes (")
}

// Half the attempts fail and a record gets one retry: a quarter of the
// records are given up on, each after its two attempts, still in order,
// and the partitions commit past them.
func TestRunDeadLetters(t *testing.T) {
	cfg := smallConfig()
	cfg.FailRate, cfg.MaxRetries, cfg.Quiet = 0.5, 1, true
	sum, err := run(t.Context(), cfg, nil)
	require.NoError(t, err)
	assert.True(t, sum.Verified)
	assert.Positive(t, sum.DeadLettered)
	assert.Equal(t, uint64(cfg.Records), sum.Processed+sum.DeadLettered)
	assert.Equal(t, sum.Outcome.DeadLettered, int(sum.DeadLettered))
	assert.InDelta(t, cfg.Records/4, sum.DeadLettered, float64(cfg.Records)/10)
}

// One partition and a few keys: the workers outnumber the keys, and each
// key's records queue up behind each other.
func TestRunFewKeys(t *testing.T) {
	cfg := smallConfig()
	cfg.Partitions, cfg.Keys, cfg.Quiet = 1, 3, true
	sum, err := run(t.Context(), cfg, nil)
	require.NoError(t, err)
	assert.True(t, sum.Verified)
	assert.Equal(t, 1, sum.Partitions)
	assert.Equal(t, 3, sum.Outcome.Keys)
}

func TestRunCanceled(t *testing.T) {
	cfg := defaultConfig() // long enough to be canceled midway
	cfg.Quiet = true
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	sum, err := run(ctx, cfg, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, sum.Checked)
	assert.False(t, sum.Verified)
	assert.Less(t, time.Since(start), 2*time.Second, "run must stop promptly")
	var s bytes.Buffer
	sum.print(&s)
	assert.Contains(t, s.String(), "not verified: the run did not finish")
}

// A handler that never ends makes the run fail with where each partition
// is held up, instead of hanging.
func TestRunStall(t *testing.T) {
	cfg := smallConfig()
	cfg.Work, cfg.Stall, cfg.Quiet = time.Minute, 100*time.Millisecond, true
	start := time.Now()
	_, err := run(t.Context(), cfg, nil)
	require.Error(t, err)
	assert.ErrorContains(t, err, "no record finished for 100ms")
	assert.ErrorContains(t, err, "partition 0 at offset 0")
	// It does not wait for the stuck handler's minute of work (only the
	// bound of a failure: a loaded machine may take a while to stop).
	assert.Less(t, time.Since(start), cfg.Work/2)
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-brokers", "a:9092,b:9092", "-topic", "t", "-partitions", "8", "-keys", "7",
		"-records", "70", "-workers", "5", "-fail", "0.5", "-work", "2ms", "-quiet"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []string{"a:9092", "b:9092"}, cfg.Brokers)
	assert.Equal(t, "t", cfg.Topic)
	assert.Equal(t, 8, cfg.Partitions)
	assert.Equal(t, 7, cfg.Keys)
	assert.Equal(t, 70, cfg.Records)
	assert.Equal(t, 5, cfg.Workers)
	assert.Equal(t, 0.5, cfg.FailRate)
	assert.Equal(t, 2*time.Millisecond, cfg.Work)
	assert.True(t, cfg.Quiet)

	for _, args := range [][]string{
		{"-topic", ""},
		{"-partitions", "0"},
		{"-keys", "0"},
		{"-records", "-5"},
		{"-workers", "0"},
		{"-queue", "0"},
		{"-fail", "1.5"},
		{"-fail", "NaN"},
		{"-max-retries", "-1"},
		{"-work", "-1ms"},
		{"-workers", "many"},
		{"-nope"},
		{"extra"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(args, &stderr)
		assert.Error(t, err, "%q", args)
		assert.Contains(t, stderr.String(), "usage:", "%q", args)
	}
}

func TestRealMain(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, realMain([]string{"-workers", "0"}, &stdout, &stderr))
	assert.Equal(t, 0, realMain([]string{"-h"}, &stdout, &stderr))

	stdout.Reset()
	stderr.Reset()
	code := realMain([]string{"-keys", "5", "-records", "200", "-work", "0", "-quiet"}, &stdout, &stderr)
	assert.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), "per-key order        verified: yes")
	assert.Empty(t, stderr.String())
}
