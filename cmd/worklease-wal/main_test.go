package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is when the fixture's story starts: long ago, so that every lease in
// the journal has expired by the wall clock. A tool that read it would
// revoke them, journaling the expiry, which the read-only log refuses.
var t0 = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// fixture is a journal built by a Manager, and what the Manager answered.
type fixture struct {
	dir      string
	orders4  worklease.Token // orders' lease in flight, on offset 4
	emails0  worklease.Token // emails' lease in flight, on offset 0
	gone0    worklease.Token // the lease of a domain forgotten since
	expires  time.Time       // emails' lease expiry, after Extend
	records  int             // records after the snapshot
	lastSeq  uint64
	snapshot uint64
}

// tabDomain is a domain whose name needs quoting in text output.
const tabDomain = "tenant\twith tab"

// buildJournal runs a Manager on a new journal in a temp directory: work
// processed, failed with causes, killed, leases in flight, a paused domain,
// a forgotten one, and a snapshot followed by more records.
func buildJournal(t *testing.T) fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "journal")
	l, err := wal.Open(dir)
	require.NoError(t, err)
	clk := clock.NewFake(t0)
	m, err := worklease.New(worklease.WithJournal(l), worklease.WithClock(clk),
		worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(1))
	require.NoError(t, err)
	f := fixture{dir: dir}

	acquire := func(domain string, offset int64) worklease.Token {
		t.Helper()
		res, err := m.TryAcquire(domain, offset)
		require.NoError(t, err)
		require.Equal(t, worklease.Acquired, res.Status, "%s/%d", domain, offset)
		return res.Token
	}
	enqueue := func(domain string, offset int64) {
		t.Helper()
		res, err := m.TryAcquire(domain, offset)
		require.NoError(t, err)
		require.Equal(t, worklease.Enqueued, res.Status, "%s/%d", domain, offset)
	}
	succeed := func(domain string, tok worklease.Token) {
		t.Helper()
		_, err := m.Succeed(domain, tok)
		require.NoError(t, err)
	}
	fail := func(domain string, tok worklease.Token, cause string, want worklease.FailStatus) {
		t.Helper()
		res, err := m.Fail(domain, tok, errors.New(cause))
		require.NoError(t, err)
		require.Equal(t, want, res.Status)
	}

	succeed("orders", acquire("orders", 1))
	succeed("orders", acquire("orders", 2))
	clk.Set(t0.Add(time.Second))
	tok := acquire("orders", 3)
	fail("orders", tok, "card declined", worklease.RetryScheduled)
	clk.Set(t0.Add(2 * time.Second))
	fail("orders", tok, "card declined\tagain", worklease.GiveUpNoBacklog)
	clk.Set(t0.Add(3 * time.Second))
	f.orders4 = acquire("orders", 4)
	enqueue("orders", 5)
	enqueue("orders", 6)
	succeed("billing", acquire("billing", 10))
	require.NoError(t, m.Pause("billing"))
	enqueue("billing", 11)
	_, err = m.Kill(tabDomain, 7, "poison: bad json")
	require.NoError(t, err)

	require.NoError(t, m.Snapshot())
	f.snapshot = l.Stats().LastSeq
	require.Positive(t, f.snapshot)

	clk.Set(t0.Add(4 * time.Second))
	f.emails0 = acquire("emails", 0)
	f.expires, err = m.Extend("emails", f.emails0, 5*time.Minute)
	require.NoError(t, err)
	fail("orders", f.orders4, "timeout", worklease.RetryScheduled)
	f.gone0 = acquire("gone", 0)
	succeed("gone", f.gone0)
	require.NoError(t, m.Forget("gone"))
	f.lastSeq = l.Stats().LastSeq
	f.records = int(f.lastSeq - f.snapshot)
	require.NoError(t, m.Close())
	return f
}

// dirBytes returns the content of every file in dir, by name.
func dirBytes(t testing.TB, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// runTool runs the command with args and returns its exit status, stdout
// and stderr.
func runTool(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// lines joins lines, each ended by a newline.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// keyValues parses the key-value output of verify and stats.
func keyValues(t *testing.T, out string) map[string]string {
	t.Helper()
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, "key\tvalue", ls[0])
	kv := map[string]string{}
	for _, l := range ls[1:] {
		k, v, ok := strings.Cut(l, "\t")
		require.True(t, ok, l)
		require.NotContains(t, kv, k)
		kv[k] = v
	}
	return kv
}

// fileSize returns the size of dir/name.
func fileSize(t *testing.T, dir, name string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, name))
	require.NoError(t, err)
	return fi.Size()
}

func TestVerify(t *testing.T) {
	f := buildJournal(t)
	code, out, errOut := runTool("verify", f.dir)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.Equal(t, lines(
		"key\tvalue",
		"dir\t"+f.dir,
		"status\tok",
		"segments\t1",
		fmt.Sprintf("log_bytes\t%d", fileSize(t, f.dir, "0000000000000001.wal")),
		fmt.Sprintf("snapshot_seq\t%d", f.snapshot),
		fmt.Sprintf("snapshot_bytes\t%d", fileSize(t, f.dir, "snapshot")),
		fmt.Sprintf("last_seq\t%d", f.lastSeq),
		fmt.Sprintf("records\t%d", f.records),
		"domains\t4",
		"torn_file\t-",
		"torn_offset\t-",
		"torn_bytes\t-",
		"torn_reason\t-",
		"leftover\t-",
	), out)

	code, out, _ = runTool("verify", "-json", f.dir)
	require.Equal(t, 0, code)
	var r verifyReport
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, verifyReport{
		Dir: &f.dir, Status: "ok", Segments: 1,
		LogBytes:    fileSize(t, f.dir, "0000000000000001.wal"),
		SnapshotSeq: f.snapshot, SnapshotBytes: fileSize(t, f.dir, "snapshot"),
		LastSeq: f.lastSeq, Records: f.records, Domains: 4,
	}, r)
}

func TestStats(t *testing.T) {
	f := buildJournal(t)
	code, out, errOut := runTool("stats", f.dir)
	require.Equal(t, 0, code, errOut)
	kv := keyValues(t, out)
	want := map[string]string{
		"segments": "1", "snapshot_seq": fmt.Sprint(f.snapshot), "last_seq": fmt.Sprint(f.lastSeq),
		"records": fmt.Sprint(f.records), "records.Acquired": "2", "records.Extended": "1",
		"records.Retrying": "1", "records.Processed": "1", "records.Forgotten": "1", "records.Enqueued": "0",
		"domains": "4", "leased": "2", "paused": "1", "queued": "3", "processed": "3", "failed": "2",
	}
	for k, v := range want {
		assert.Equal(t, v, kv[k], k)
	}
	sum := 0
	for _, k := range journaledKinds {
		n, ok := kv["records."+k.String()]
		require.True(t, ok, "every kind is listed: %v", k)
		var c int
		_, err := fmt.Sscan(n, &c)
		require.NoError(t, err)
		sum += c
	}
	assert.Equal(t, f.records, sum, "the kinds add up to the records")

	code, out, _ = runTool("stats", "-json", f.dir)
	require.Equal(t, 0, code)
	var r statsReport
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, 4, r.Domains)
	assert.Equal(t, 2, r.Kinds["Acquired"])
	assert.Len(t, r.Kinds, len(journaledKinds))
}

func TestDomainsCommand(t *testing.T) {
	f := buildJournal(t)
	code, out, errOut := runTool("domains", f.dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, lines(
		"domain\tleased\toffset\tbacklog\tprocessed\tfailed\tpaused",
		"billing\tfalse\t-\t1\t1\t0\ttrue",
		"emails\ttrue\t0\t0\t0\t0\tfalse",
		"orders\ttrue\t4\t2\t2\t1\tfalse",
		`"tenant\twith tab"`+"\tfalse\t-\t0\t0\t1\tfalse",
	), out)

	code, out, _ = runTool("domains", "-json", f.dir)
	require.Equal(t, 0, code)
	assert.Equal(t, lines(
		`{"domain":"billing","leased":false,"backlog":1,"processed":1,"failed":0,"paused":true}`,
		`{"domain":"emails","leased":true,"offset":0,"backlog":0,"processed":0,"failed":0,"paused":false}`,
		`{"domain":"orders","leased":true,"offset":4,"backlog":2,"processed":2,"failed":1,"paused":false}`,
		`{"domain":"tenant\twith tab","leased":false,"backlog":0,"processed":0,"failed":1,"paused":false}`,
	), out)
}

func TestLeases(t *testing.T) {
	f := buildJournal(t)
	code, out, errOut := runTool("leases", f.dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, lines(
		"domain\toffset\ttoken\tfence\tacquired\texpires\tretries",
		"emails\t0\t"+f.emails0.String()+"\t1\t2001-02-03T04:05:10Z\t2001-02-03T04:10:10Z\t0",
		"orders\t4\t"+f.orders4.String()+"\t4\t2001-02-03T04:05:09Z\t2001-02-03T04:06:10Z\t1",
	), out)
	assert.Equal(t, f.expires, time.Date(2001, 2, 3, 4, 10, 10, 0, time.UTC))

	code, out, _ = runTool("leases", "-json", f.dir)
	require.Equal(t, 0, code)
	var got []leaseRow
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r leaseRow
		require.NoError(t, dec.Decode(&r))
		got = append(got, r)
	}
	require.Len(t, got, 2)
	assert.Equal(t, f.emails0, got[0].Token, "the JSON token parses back")
	assert.Equal(t, f.orders4, got[1].Token)
	assert.Equal(t, f.expires, got[0].Expires)
}

// TestLeaseStillHeld checks the leases the tool reports can be finished by
// their holders after a restart: the tool changed nothing.
func TestLeaseStillHeld(t *testing.T) {
	f := buildJournal(t)
	for _, c := range commands {
		code, _, errOut := runTool(c.name, f.dir)
		require.Equal(t, 0, code, errOut)
	}
	m, err := worklease.New(worklease.WithJournal(mustOpen(t, f.dir)), worklease.WithClock(clock.NewFake(t0.Add(5*time.Second))),
		worklease.WithLeaseTTL(time.Minute))
	require.NoError(t, err)
	_, err = m.Succeed("orders", f.orders4)
	require.NoError(t, err)
	require.NoError(t, m.Close())
}

func mustOpen(t *testing.T, dir string) *wal.Log {
	t.Helper()
	l, err := wal.Open(dir)
	require.NoError(t, err)
	return l
}

func TestDead(t *testing.T) {
	f := buildJournal(t)
	code, out, errOut := runTool("dead", f.dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, lines(
		"domain\toffset\tattempts\tat\tcause",
		"orders\t3\t2\t2001-02-03T04:05:08Z\t"+`"card declined\tagain"`,
		`"tenant\twith tab"`+"\t7\t0\t2001-02-03T04:05:09Z\tpoison: bad json",
	), out)

	code, out, _ = runTool("dead", "-json", f.dir)
	require.Equal(t, 0, code)
	assert.Equal(t, lines(
		`{"domain":"orders","offset":3,"attempts":2,"at":"2001-02-03T04:05:08Z","cause":"card declined\tagain"}`,
		`{"domain":"tenant\twith tab","offset":7,"attempts":0,"at":"2001-02-03T04:05:09Z","cause":"poison: bad json"}`,
	), out)
}

func TestDump(t *testing.T) {
	f := buildJournal(t)
	code, out, errOut := runTool("dump", f.dir)
	require.Equal(t, 0, code, errOut)
	seq := func(i int) string { return fmt.Sprint(f.snapshot + uint64(i)) }
	e, o, g := f.emails0.String(), f.orders4.String(), f.gone0.String()
	assert.Equal(t, lines(
		"seq\tkind\tdomain\toffset\ttoken\tattempt\tretries\tfront\tat\tacquired\texpires\tcause\tmonotonic\tnot_before\tkey\tpayload",
		seq(1)+"\tAcquired\temails\t0\t"+e+"\t1\t0\tfalse\t2001-02-03T04:05:10Z\t2001-02-03T04:05:10Z\t2001-02-03T04:06:10Z\t-\tfalse\t-\t-\t-",
		seq(2)+"\tExtended\temails\t0\t"+e+"\t1\t0\tfalse\t2001-02-03T04:05:10Z\t2001-02-03T04:05:10Z\t2001-02-03T04:10:10Z\t-\tfalse\t-\t-\t-",
		seq(3)+"\tRetrying\torders\t4\t"+o+"\t1\t1\tfalse\t2001-02-03T04:05:10Z\t2001-02-03T04:05:09Z\t2001-02-03T04:06:10Z\ttimeout\tfalse\t-\t-\t-",
		seq(4)+"\tAcquired\tgone\t0\t"+g+"\t1\t0\tfalse\t2001-02-03T04:05:10Z\t2001-02-03T04:05:10Z\t2001-02-03T04:06:10Z\t-\tfalse\t-\t-\t-",
		seq(5)+"\tProcessed\tgone\t0\t"+g+"\t1\t0\tfalse\t2001-02-03T04:05:10Z\t-\t-\t-\tfalse\t-\t-\t-",
		seq(6)+"\tForgotten\tgone\t-\t-\t0\t0\tfalse\t2001-02-03T04:05:10Z\t-\t-\t-\tfalse\t-\t-\t-",
	), out)

	code, out, _ = runTool("dump", "-json", f.dir)
	require.Equal(t, 0, code)
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, ls, f.records)
	assert.Equal(t, `{"seq":`+seq(3)+`,"kind":"Retrying","domain":"orders","offset":4,"token":"`+o+
		`","attempt":1,"retries":1,"at":"2001-02-03T04:05:10Z","acquired":"2001-02-03T04:05:09Z","expires":"2001-02-03T04:06:10Z","cause":"timeout"}`, ls[2])
	var kinds []string
	for _, l := range ls {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		kinds = append(kinds, r["kind"].(string))
	}
	assert.Equal(t, []string{"Acquired", "Extended", "Retrying", "Acquired", "Processed", "Forgotten"}, kinds)
}

// TestReadOnly runs every command, as text and JSON, on the fixture, and
// checks after each that the directory is byte for byte as it was.
func TestReadOnly(t *testing.T) {
	f := buildJournal(t)
	before := dirBytes(t, f.dir)
	require.Contains(t, before, "snapshot")
	require.Contains(t, before, "LOCK")
	for _, c := range commands {
		for _, args := range [][]string{{c.name, f.dir}, {c.name, "-json", f.dir}} {
			code, _, errOut := runTool(args...)
			require.Equal(t, 0, code, "%v: %s", args, errOut)
			require.Equal(t, before, dirBytes(t, f.dir), "%v changed the directory", args)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		code, out, errOut := runTool(args...)
		assert.Equal(t, 0, code, args)
		assert.Empty(t, errOut)
		assert.True(t, strings.HasPrefix(out, "Usage: worklease-wal <command> [flags] <dir>\n"), out)
		for _, c := range commands {
			assert.Contains(t, out, "\n  "+c.name+" ", "the usage lists %s", c.name)
		}
		assert.Contains(t, out, "Exit status")
	}
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}, {c.name, "/some/dir", "-h"}} {
			code, out, errOut := runTool(args...)
			assert.Equal(t, 0, code, args)
			assert.Empty(t, errOut)
			assert.True(t, strings.HasPrefix(out, "Usage: worklease-wal "+c.name+" [-json] <dir>\n"), out)
			assert.Contains(t, out, c.about)
			assert.Contains(t, out, "-json")
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate", "/tmp"}, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"verify"}, "want one journal directory, got 0"},
		{[]string{"dump", "a", "b"}, "want one journal directory, got 2"},
		{[]string{"leases", "-yaml", "dir"}, "flag provided but not defined: -yaml"},
		{[]string{"stats", "-json=maybe", "dir"}, "invalid boolean value"},
	}
	for _, tt := range tests {
		code, out, errOut := runTool(tt.args...)
		assert.Equal(t, 2, code, tt.args)
		assert.Empty(t, out, tt.args)
		assert.Contains(t, errOut, tt.want, tt.args)
		assert.Contains(t, errOut, "Usage: worklease-wal", tt.args)
	}
}

func TestFlagsAnywhere(t *testing.T) {
	f := buildJournal(t)
	_, want, _ := runTool("leases", "-json", f.dir)
	for _, args := range [][]string{{"leases", f.dir, "-json"}, {"leases", "--json", "--", f.dir}} {
		code, out, errOut := runTool(args...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, want, out, args)
	}
}

// writeSegments writes batches of Manager-less records to a new log in dir
// with small segments, so that the first is sealed, and returns the
// directory.
func writeSegments(t *testing.T, dir string) {
	t.Helper()
	l, err := wal.Open(dir, wal.WithSegmentSize(wal.MinSegmentSize))
	require.NoError(t, err)
	m, err := worklease.New(worklease.WithJournal(l), worklease.WithClock(clock.NewFake(t0)))
	require.NoError(t, err)
	for i := range 40 {
		res, err := m.TryAcquire(fmt.Sprintf("domain-%02d", i%7), int64(i))
		require.NoError(t, err)
		if res.Status == worklease.Acquired {
			_, err = m.Succeed(fmt.Sprintf("domain-%02d", i%7), res.Token)
			require.NoError(t, err)
		}
	}
	require.NoError(t, m.Close())
	require.FileExists(t, filepath.Join(dir, "0000000000000002.wal"), "the test needs a sealed segment")
}

func TestCorruptJournal(t *testing.T) {
	dir := t.TempDir()
	writeSegments(t, dir)
	seg := filepath.Join(dir, "0000000000000001.wal")
	b, err := os.ReadFile(seg)
	require.NoError(t, err)
	b[32+17+3] ^= 0x10 // a payload byte of the first record, after the 32-byte header and 17-byte frame header
	require.NoError(t, os.WriteFile(seg, b, 0o644))
	before := dirBytes(t, dir)

	for _, c := range commands {
		code, out, errOut := runTool(c.name, dir)
		assert.Equal(t, 1, code, c.name)
		assert.Empty(t, out, c.name)
		assert.Contains(t, errOut, "worklease-wal "+c.name+" "+dir+": wal: corrupt log: 0000000000000001.wal at offset 32: invalid record", c.name)
		assert.Equal(t, before, dirBytes(t, dir))
	}
}

func TestReplayErrors(t *testing.T) {
	t.Run("invariant", func(t *testing.T) {
		dir := t.TempDir()
		l := mustOpen(t, dir)
		_, err := l.AppendRecord(worklease.Record{Kind: worklease.EventPaused, Domain: "x", Offset: -1, At: t0})
		require.NoError(t, err)
		seq, err := l.AppendRecord(worklease.Record{Kind: worklease.EventProcessed, Domain: "x", Offset: 1, At: t0})
		require.NoError(t, err)
		require.NoError(t, l.Wait(seq))
		require.NoError(t, l.Close())

		code, out, errOut := runTool("verify", dir)
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Contains(t, errOut, `record 2 (Processed on domain "x", offset 1): completes a lease that is not held`)

		// dump decodes without replaying: it shows the culprit.
		code, out, errOut = runTool("dump", dir)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "\n2\tProcessed\tx\t1\t-\t0\t0\tfalse\t2001-02-03T04:05:06Z\t-\t-\t-\tfalse\t-\t-\t-\n")
	})
	t.Run("undecodable", func(t *testing.T) {
		dir := t.TempDir()
		l := mustOpen(t, dir)
		_, err := l.AppendRecord(worklease.Record{Kind: worklease.EventPaused, Domain: "x", Offset: -1, At: t0})
		require.NoError(t, err)
		seq, err := l.Append(wal.RecordKind, []byte{1, 2, 3})
		require.NoError(t, err)
		require.NoError(t, l.Wait(seq))
		require.NoError(t, l.Close())
		for _, c := range commands {
			code, _, errOut := runTool(c.name, dir)
			assert.Equal(t, 1, code, c.name)
			assert.Contains(t, errOut, "record 2: record: ", c.name)
		}
	})
	t.Run("bad snapshot state", func(t *testing.T) {
		dir := t.TempDir()
		l := mustOpen(t, dir)
		seq, err := l.Append(wal.RecordKind, nil)
		require.NoError(t, err)
		require.NoError(t, l.WriteSnapshot(seq, func(w io.Writer) error {
			_, err := io.WriteString(w, "not a worklease snapshot")
			return err
		}))
		require.NoError(t, l.Close())
		code, _, errOut := runTool("verify", dir)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "snapshot: not a worklease snapshot")
	})
}

func TestTornTail(t *testing.T) {
	f := buildJournal(t)
	seg := filepath.Join(f.dir, "0000000000000001.wal")
	size := fileSize(t, f.dir, "0000000000000001.wal")
	file, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = file.Write([]byte{40, 0, 0, 0, 1, 2, 3}) // a write a crash cut short
	require.NoError(t, err)
	require.NoError(t, file.Close())
	before := dirBytes(t, f.dir)

	code, out, errOut := runTool("verify", f.dir)
	require.Equal(t, 0, code, errOut)
	kv := keyValues(t, out)
	assert.Equal(t, "ok", kv["status"])
	assert.Equal(t, "0000000000000001.wal", kv["torn_file"])
	assert.Equal(t, fmt.Sprint(size), kv["torn_offset"])
	assert.Equal(t, "7", kv["torn_bytes"])
	assert.Contains(t, kv["torn_reason"], "unexpected EOF")
	assert.Equal(t, fmt.Sprint(size), kv["log_bytes"], "committed bytes only")
	assert.Equal(t, fmt.Sprint(f.records), kv["records"])

	code, out, _ = runTool("verify", "-json", f.dir)
	require.Equal(t, 0, code)
	var r verifyReport
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.NotNil(t, r.Torn)
	assert.Equal(t, int64(7), r.Torn.Bytes)
	assert.Equal(t, before, dirBytes(t, f.dir), "the torn tail is reported, not cut")
}

func TestLeftoverFiles(t *testing.T) {
	f := buildJournal(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "snapshot.tmp"), []byte("half"), 0o644))
	code, out, errOut := runTool("verify", f.dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "snapshot.tmp", keyValues(t, out)["leftover"])
	assert.FileExists(t, filepath.Join(f.dir, "snapshot.tmp"))
}

func TestOpenErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	code, _, errOut := runTool("domains", missing)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no such file or directory")
	assert.NoDirExists(t, missing)

	empty := t.TempDir()
	code, _, errOut = runTool("stats", empty)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no log in "+empty)
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":          "plain",
		"with space":     "with space",
		"":               `""`,
		"-":              `"-"`,
		`"quoted"`:       `"\"quoted\""`,
		"tab\there":      `"tab\there"`,
		"new\nline":      `"new\nline"`,
		"back\\slash":    `back\slash`,
		"héllo":          "héllo",
		"bell\a":         `"bell\a"`,
		"in\"side":       `in"side`,
		"\xff not utf-8": `"\xff not utf-8"`,
	} {
		assert.Equal(t, want, text(in), "%q", in)
	}
}

// A journal a Manager WithMonotonicOffsets wrote, with a snapshot whose run
// of processed offsets, [0, 8], holds a failed offset: the journal says how
// it was written, so the tool reads it right without -monotonic, and counts
// the offsets that counted as processed. With -monotonic, too.
func TestMonotonic(t *testing.T) {
	dir := t.TempDir()
	m, err := worklease.New(worklease.WithJournal(mustOpen(t, dir)), worklease.WithClock(clock.NewFake(t0)),
		worklease.WithMonotonicOffsets())
	require.NoError(t, err)
	for _, off := range []int64{3, 5, 8} {
		res, err := m.TryAcquire("keyed", off)
		require.NoError(t, err)
		if off == 5 {
			_, err = m.Kill("keyed", off, "poison")
		} else {
			_, err = m.Succeed("keyed", res.Token)
		}
		require.NoError(t, err)
	}
	require.NoError(t, m.Snapshot())
	process := func(off int64) {
		res, err := m.TryAcquire("keyed", off)
		require.NoError(t, err)
		_, err = m.Succeed("keyed", res.Token)
		require.NoError(t, err)
	}
	process(12) // a record after the snapshot, under the same rule
	require.NoError(t, m.Close())

	code, _, errOut := runTool("verify", dir)
	require.Equal(t, 0, code, errOut)
	for _, args := range [][]string{{"domains", dir}, {"domains", "-monotonic", dir}} {
		code, out, errOut := runTool(args...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, lines(
			"domain\tleased\toffset\tbacklog\tprocessed\tfailed\tpaused",
			"keyed\tfalse\t-\t0\t12\t1\tfalse", // [0, 12] but the failed 5
		), out, "%v", args)
	}
	code, _, errOut = runTool("dump", "-monotonic", dir)
	require.Equal(t, 0, code, errOut)
	code, out, _ := runTool("verify", "-h")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "-monotonic")
}

// A journal written before domains were bounded may hold a domain no call
// accepts now, such as the empty one: domains and stats show every other
// domain, and say on stderr which one they cannot show.
func TestUnboundedDomain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	l, err := wal.Open(dir)
	require.NoError(t, err)
	for _, rec := range []worklease.Record{
		{Kind: worklease.EventPaused, Domain: "", Offset: -1},
		{Kind: worklease.EventEnqueued, Domain: "", Offset: 3},
		{Kind: worklease.EventPaused, Domain: "ok", Offset: -1},
	} {
		payload, err := rec.MarshalBinary()
		require.NoError(t, err)
		seq, err := l.Append(wal.RecordKind, payload)
		require.NoError(t, err)
		require.NoError(t, l.Wait(seq))
	}
	require.NoError(t, l.Close())

	code, out, errOut := runTool("domains", dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, lines(
		"domain\tleased\toffset\tbacklog\tprocessed\tfailed\tpaused",
		"ok\tfalse\t-\t0\t0\t0\ttrue",
	), out)
	assert.Contains(t, errOut, `domain "" is not shown`)

	code, out, errOut = runTool("stats", dir)
	require.Equal(t, 0, code, errOut)
	kv := keyValues(t, out)
	assert.Equal(t, "2", kv["domains"])
	assert.Equal(t, "1", kv["paused"])
	assert.Contains(t, errOut, `domain "" is not shown`)
}

// decodeText returns the text field key of a JSON object: key's string, or
// the bytes of key_base64, and whether either is there.
func decodeText(t *testing.T, obj map[string]any, key string) (string, bool) {
	t.Helper()
	s, isString := obj[key].(string)
	b64, isBase64 := obj[key+"_base64"].(string)
	require.False(t, isString && isBase64, "both %s and %s_base64 in %v", key, key, obj)
	if !isBase64 {
		return s, isString
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	return string(b), true
}

// Domains and causes are byte strings, valid UTF-8 or not; JSON output
// gives each back exactly, under domain_base64 or cause_base64 when it is
// not valid UTF-8, for every command that prints one.
func TestJSONRoundTripsAnyBytes(t *testing.T) {
	const (
		badDomain = "key-\xff\xfe-bytes"
		badCause  = "bad \xc3\x28 utf-8"
		goodCause = "déjà \ufffd vu" // valid UTF-8, U+FFFD included: stays a string
	)
	dir := t.TempDir()
	m, err := worklease.New(worklease.WithJournal(mustOpen(t, dir)), worklease.WithClock(clock.NewFake(t0)),
		worklease.WithMaxRetries(0))
	require.NoError(t, err)
	_, err = m.Kill(badDomain, 1, badCause)
	require.NoError(t, err)
	_, err = m.Kill("plain", 1, goodCause)
	require.NoError(t, err)
	_, err = m.TryAcquire(badDomain, 2)
	require.NoError(t, err)
	_, err = m.TryAcquire("plain", 2)
	require.NoError(t, err)
	require.NoError(t, m.Close())

	for _, command := range []string{"domains", "leases", "dead", "dump"} {
		t.Run(command, func(t *testing.T) {
			code, out, errOut := runTool(command, "-json", dir)
			require.Equal(t, 0, code, errOut)
			var domains, causes []string
			for l := range strings.Lines(out) {
				var obj map[string]any
				require.NoError(t, json.Unmarshal([]byte(l), &obj))
				d, ok := decodeText(t, obj, "domain")
				require.True(t, ok, "no domain in %s", l)
				domains = append(domains, d)
				if c, ok := decodeText(t, obj, "cause"); ok {
					causes = append(causes, c)
				}
				if d == badDomain {
					assert.NotContains(t, obj, "domain", "a domain that is not UTF-8 is in base64 only")
				} else {
					assert.Contains(t, obj, "domain")
				}
			}
			assert.Contains(t, domains, badDomain)
			assert.Contains(t, domains, "plain")
			switch command {
			case "dead":
				assert.ElementsMatch(t, []string{badCause, goodCause}, causes)
			case "dump": // each kill's Killed and DeadLettered records
				assert.ElementsMatch(t, []string{badCause, badCause, goodCause, goodCause}, causes)
			}
		})
	}

	t.Run("verify", func(t *testing.T) {
		moved := filepath.Join(t.TempDir(), "journal-\xff")
		require.NoError(t, os.Rename(dir, moved))
		code, out, errOut := runTool("verify", "-json", moved)
		require.Equal(t, 0, code, errOut)
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &obj))
		got, ok := decodeText(t, obj, "dir")
		require.True(t, ok)
		assert.Equal(t, moved, got)
		assert.NotContains(t, obj, "dir")
	})
}

// TestPayloads lists the payloads a journal holds, queued, in flight and
// dead-lettered, across snapshots that leave their records in segments
// the snapshot keeps, and writes one back byte for byte.
func TestPayloads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	l, err := wal.Open(dir, wal.WithSegmentSize(wal.MinSegmentSize), wal.WithSnapshotEvery(1<<10))
	require.NoError(t, err)
	m, err := worklease.New(worklease.WithJournal(l), worklease.WithClock(clock.NewFake(t0)), worklease.WithMaxRetries(0))
	require.NoError(t, err)
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 300)
	for off, p := range [][]byte{1: []byte("first"), 2: big, 3: nil, 4: {}} {
		if off > 0 {
			_, err := m.Enqueue("a", int64(off), p)
			require.NoError(t, err)
		}
	}
	_, err = m.Enqueue("b\tc", 7, []byte("dead"))
	require.NoError(t, err)
	for i := range 200 { // records enough for segments and snapshots to come and go
		_, err := m.Append("busy", []byte("x"), worklease.AppendOptions{})
		require.NoError(t, err)
		cs, err := m.Claim(1)
		require.NoError(t, err)
		require.Len(t, cs, 1, i)
		if cs[0].Domain == "b\tc" {
			_, err = m.Kill("b\tc", 7, "poison")
			require.NoError(t, err)
			continue
		}
		if cs[0].Domain == "a" && cs[0].Offset == 1 { // in flight at the end
			continue
		}
		_, err = m.Succeed(cs[0].Domain, cs[0].Token)
		require.NoError(t, err)
	}
	require.NoError(t, m.Close())
	require.Contains(t, dirBytes(t, dir), "kept", "segments kept for their payloads")

	code, out, errOut := runTool("payloads", dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, lines(
		"domain\toffset\tstate\tbytes",
		"a\t1\tleased\t5",
		"a\t2\tqueued\t1200",
		"a\t4\tqueued\t0",
		`"b\tc"`+"\t7\tfailed\t4",
		"busy\t198\tqueued\t1", // appended after the last claims
		"busy\t199\tqueued\t1",
	), out)

	code, out, errOut = runTool("payloads", "-domain", "a", "-offset", "2", dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, string(big), out)
	code, out, errOut = runTool("payloads", "-json", "-domain", "b\tc", "-offset", "7", dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `{"domain":"b\tc","offset":7,"state":"failed","bytes":4,"payload_base64":"ZGVhZA=="}`+"\n", out)
	code, _, errOut = runTool("payloads", "-domain", "a", "-offset", "3", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "a/3 holds no payload")
}
