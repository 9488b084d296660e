package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The example's workers are this test binary again.
	if os.Getenv(roleEnv) == "worker" {
		os.Exit(workerMain())
	}
	goleak.VerifyTestMain(m)
}

// The example runs to the end on the test server, its checks passing,
// with one worker killed midway.
func TestExample(t *testing.T) {
	url := os.Getenv("WORKLEASE_PG_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("WORKLEASE_PG_URL is not set: run the tests with make test, which starts a PostgreSQL server")
		}
		t.Skip("no PostgreSQL server: WORKLEASE_PG_URL is not set (make test starts one and sets it)")
	}
	var out bytes.Buffer
	cfg := config{url: url, workers: 3, domains: 8, offsets: 60, ttl: 500 * time.Millisecond, work: 2 * time.Millisecond, killAfter: 0.3}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"killed worker 1", "verified: every domain's offsets took effect exactly once, in order"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
