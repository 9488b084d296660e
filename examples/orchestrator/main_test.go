package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// smallConfig is a run that takes a few tens of milliseconds, even under -race.
func smallConfig() config {
	cfg := defaultConfig()
	cfg.Domains, cfg.Events, cfg.Workers, cfg.Producers = 50, 2000, 8, 3
	cfg.FailRate, cfg.DupRate = 0.2, 0.05
	cfg.Seed = 42
	cfg.Work = 20 * time.Microsecond
	cfg.Progress = 10 * time.Millisecond
	return cfg
}

func TestRun(t *testing.T) {
	cfg := smallConfig()
	var out bytes.Buffer
	sum, err := run(t.Context(), cfg, &out)
	require.NoError(t, err)

	assert.True(t, sum.OrderVerified)
	assert.Equal(t, int64(cfg.Events), sum.Processed+sum.DeadLettered, "every event terminal once")
	assert.Positive(t, sum.Processed)
	assert.Positive(t, sum.Retries, "a 20%% fail rate must cause retries")
	assert.Positive(t, sum.DuplicatesInjected)
	assert.Equal(t, int64(sum.DuplicatesInjected), sum.DuplicatesIgnored(), "every duplicate turned away")
	assert.Equal(t, cfg.Events+sum.DuplicatesInjected, sum.Deliveries)
	assert.Equal(t, sum.Enqueued, sum.HandOffs, "every queued offset handed off once")
	assert.Contains(t, out.String(), "orchestrator: 2000 events")

	var s strings.Builder
	sum.print(&s)
	assert.Contains(t, s.String(), "verified: yes")
}

// With the failures drawn from the seed, the outcome counts don't depend on
// how the goroutines were scheduled.
func TestRunReplaysSeed(t *testing.T) {
	cfg := smallConfig()
	cfg.Quiet = true
	a, err := run(t.Context(), cfg, nil)
	require.NoError(t, err)
	b, err := run(t.Context(), cfg, nil)
	require.NoError(t, err)
	assert.Equal(t, a.Processed, b.Processed)
	assert.Equal(t, a.DeadLettered, b.DeadLettered)
	assert.Equal(t, a.Retries, b.Retries)
	assert.Equal(t, a.DuplicatesInjected, b.DuplicatesInjected)
}

func TestRunWithoutFailures(t *testing.T) {
	cfg := smallConfig()
	cfg.FailRate, cfg.DupRate, cfg.Quiet = 0, 0, true
	sum, err := run(t.Context(), cfg, nil)
	require.NoError(t, err)
	assert.True(t, sum.OrderVerified)
	assert.Equal(t, int64(cfg.Events), sum.Processed)
	assert.Zero(t, sum.DeadLettered)
	assert.Zero(t, sum.Retries)
	assert.Zero(t, sum.DuplicatesIgnored())
}

// When every attempt fails, every offset is retried MaxRetries times and
// then dead-lettered, still in order; domains queue up behind the backoffs,
// so hand-offs after a give-up are exercised too.
func TestRunEverythingFails(t *testing.T) {
	cfg := smallConfig()
	cfg.Domains, cfg.Events, cfg.FailRate, cfg.MaxRetries, cfg.Quiet = 20, 400, 1, 1, true
	sum, err := run(t.Context(), cfg, nil)
	require.NoError(t, err)
	assert.True(t, sum.OrderVerified)
	assert.Zero(t, sum.Processed)
	assert.Equal(t, int64(cfg.Events), sum.DeadLettered)
	assert.Equal(t, int64(cfg.Events*cfg.MaxRetries), sum.Retries)
	assert.Positive(t, sum.HandOffs)
	assert.Equal(t, sum.Enqueued, sum.HandOffs)
}

func TestRunCanceled(t *testing.T) {
	cfg := defaultConfig() // long enough to be canceled midway
	cfg.Quiet = true
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	sum, err := run(ctx, cfg, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "interrupted")
	assert.False(t, sum.OrderVerified)
	assert.Less(t, time.Since(start), time.Second, "run must stop promptly")
}

// An attempt that never ends makes the watchdog fail the run with a
// description of the stuck domains, instead of hanging.
func TestRunWatchdog(t *testing.T) {
	cfg := smallConfig()
	cfg.Work = time.Minute
	cfg.Stall = 50 * time.Millisecond
	cfg.Quiet = true
	start := time.Now()
	_, err := run(t.Context(), cfg, nil)
	require.Error(t, err)
	assert.ErrorContains(t, err, "watchdog: no progress")
	assert.ErrorContains(t, err, "leased on offset")
	// It does not wait for the stuck attempts' minute of work (only the
	// bound of a failure: a loaded machine may take a while to stop).
	assert.Less(t, time.Since(start), cfg.Work/2)
}

func TestMakePlan(t *testing.T) {
	cfg := smallConfig()
	p := makePlan(cfg)
	fresh := 0
	for _, stream := range p.streams {
		last := map[int32]int64{}
		for _, dl := range stream {
			if dl.redelivery {
				continue
			}
			fresh++
			if prev, ok := last[dl.dom]; ok {
				require.Greater(t, dl.offset, prev, "offsets increase per domain")
			}
			last[dl.dom] = dl.offset
		}
	}
	assert.Equal(t, cfg.Events, fresh)
	total := 0
	for _, offs := range p.produced {
		assert.Len(t, offs, cfg.Events/cfg.Domains)
		total += len(offs)
	}
	assert.Equal(t, cfg.Events, total)
	assert.Positive(t, p.dups)
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-domains", "7", "-events", "70", "-fail-rate", "0.5", "-seed", "9", "-quiet"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 7, cfg.Domains)
	assert.Equal(t, 70, cfg.Events)
	assert.Equal(t, 0.5, cfg.FailRate)
	assert.Equal(t, uint64(9), cfg.Seed)
	assert.True(t, cfg.Quiet)
	assert.Equal(t, defaultConfig().Workers, cfg.Workers)

	for _, args := range [][]string{
		{"-domains", "0"},
		{"-events", "-5"},
		{"-workers", "0"},
		{"-producers", "0"},
		{"-fail-rate", "1.5"},
		{"-fail-rate", "NaN"},
		{"-dup-rate", "-0.1"},
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
	code := realMain([]string{"-domains", "5", "-events", "200", "-work", "0", "-quiet"}, &stdout, &stderr)
	assert.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), "per-domain order     verified: yes")
	assert.Empty(t, stderr.String())
}
