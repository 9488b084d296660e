package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out bytes.Buffer
	cfg := config{domains: 20, events: 2000, workers: 8, failRate: 0.3, dupRate: 0.1, maxRetries: 2}
	require.NoError(t, run(t.Context(), cfg, &out))
	require.Contains(t, out.String(), "2000 events over 20 domains")
	require.Contains(t, out.String(), "order verified")
}

func TestFlags(t *testing.T) {
	var out, errs bytes.Buffer
	require.Equal(t, 2, realMain([]string{"-nope"}, &out, &errs))
	require.Equal(t, 0, realMain([]string{"-h"}, &out, &errs))
}
