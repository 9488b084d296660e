// Command worklease-wal inspects a worklease journal: the directory of a
// wal.Log that a worklease.Manager journals to (worklease.WithJournal). It
// checks it, summarises it and prints the state it holds, without changing
// it.
//
//	worklease-wal <command> [flags] <dir>
//
// The commands:
//
//	verify    read every file, replay every record into a Manager, report
//	stats     segments, bytes, records by kind, domains
//	domains   one line per domain: lease, backlog, processed, failed, paused
//	leases    the leases in flight
//	dead      the dead letters, with their causes
//	dump      every record after the snapshot, one per line
//	payloads  the payloads the journal holds: domain, offset, state, bytes;
//	          or, with -domain and -offset, one payload's bytes as stored
//
// Every command takes -json, and -h for its columns. Run it from the module
// root, for example:
//
//	go run ./cmd/worklease-wal verify /var/lib/myservice/leases
//	go run ./cmd/worklease-wal dump -json /var/lib/myservice/leases | jq .
//	go run ./cmd/worklease-wal -h
//
// The directory is opened with wal.WithoutLock, read-only: the tool creates,
// repairs, removes and writes nothing, and a torn tail a crash left is
// reported, not cut. It takes no lock, so it reads a journal that a running
// Manager holds, and never keeps a Manager from opening one: it reads the
// snapshot and every whole record after it, up to the last complete one,
// which is the state the Manager had at some moment (as after a crash then:
// a record being written may be left out). A record the Manager is writing
// as the tool reads may show as a torn tail. If the Manager writes a
// snapshot while the tool reads, the tool reads the directory again.
//
// The state is rebuilt exactly as a restarting Manager rebuilds it: New
// replays the snapshot and the records after it, checking each against the
// state before it. The Manager reads a clock frozen at the zero time, so that
// no lease is found expired (which would journal a transition): leases are
// reported as the journal left them, with their expiry, whether or not it
// has passed. The Manager is only asked questions that change nothing, and
// the read-only log refuses any write anyway.
//
// A journal records whether it was written by a Manager with
// worklease.WithMonotonicOffsets (see worklease.RecordSettings), and replay
// reads each part of it under the rule it was written with. The tool's
// Manager is built without the option, which keeps every offset that
// counted as processed processed: the output is the journal's, whatever
// the Manager that wrote it used. With -monotonic the Manager is built with
// the option, and shows the journal as such a Manager opening it would see
// it. A journal that records no setting (the part of it a version of the
// package from before they were recorded wrote, up to the first record of
// a newer one) is read under the option the tool's Manager has: read a
// journal that such an older Manager with the option wrote with -monotonic.
// Without it, its processed offsets are counted by the exact rule, and a
// snapshot whose run of processed offsets holds a failed, queued or leased
// offset does not replay (the error asks whether the journal was written
// WithMonotonicOffsets).
//
// Text output is tab-separated, one header line naming the columns, then
// one line per row; "-" means none. Text fields (domains, causes) are
// printed as they are, unless they are empty, "-", start with a double quote
// or hold a tab, a newline, another unprintable character or bytes that are
// not UTF-8: those are printed as a quoted Go string literal. Times are
// RFC 3339 in UTC. With -json each row is one JSON object per line (verify
// and stats print one). A JSON string can hold only UTF-8, while a domain,
// a cause and the directory's name may be any bytes: a text field that is
// not valid UTF-8 is written instead under its key with "_base64" added,
// as the standard base64 of its bytes ({"domain_base64":"a2V5/w=="} for
// the domain "key\xff"), so that every value reads back exactly. Output
// depends only on the directory's content and the arguments.
//
// A journal written before domains were bounded may hold a domain that no
// call accepts now (the empty one, or one longer than
// worklease.MaxDomainLen): domains and stats leave its state out and name
// it on standard error; stats still counts it among the domains.
//
// The exit status is 0 on success, 1 if the journal cannot be read (it is
// corrupt, a record does not replay, the directory is missing), and
// 2 for a usage error.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const name = "worklease-wal"

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the journal could not be read
	exitUsage = 2
)

// A command is one of the tool's subcommands.
type command struct {
	name    string
	summary string // one line, for the tool's usage
	about   string // the command's usage text after its synopsis
	// manager: the command needs the Manager rebuilt from the journal.
	manager bool
	run     func(j *journal, out *printer) error
}

var commands = []*command{
	{
		name:    "verify",
		summary: "read every file, replay every record into a Manager, report",
		manager: true,
		about: `Opens the journal read-only, checks every segment and the snapshot, and
replays the snapshot and every record after it into a Manager, which checks
each record against the state before it. Exit status 1 on corruption (the
error names the file and byte offset) or on a record that does not replay
(the error names its sequence number, kind, domain and offset).

A torn tail (the end of a write a crash interrupted, which under the
default wal.SyncAlways was never acknowledged) is not corruption: it is
reported and left in place; the next Manager to open the journal cuts it.
So are leftover files that a writable open would remove.

Keys: dir, status (ok), segments, log_bytes (committed bytes in segments),
snapshot_seq, snapshot_bytes (the snapshot file), last_seq, records
(records after the snapshot), domains, torn_file, torn_offset, torn_bytes,
torn_reason, leftover (space-separated file names).`,
		run: verify,
	},
	{
		name:    "stats",
		summary: "segments, bytes, records by kind, domains",
		manager: true,
		about: `Sizes and counts: segments, log_bytes, snapshot_seq, snapshot_bytes,
last_seq, records (after the snapshot), records.<Kind> for every kind of
record, domains, leased (domains with a lease in flight), paused, queued
(offsets waiting in backlogs), processed and failed (terminal offsets).`,
		run: stats,
	},
	{
		name:    "domains",
		summary: "one line per domain: lease, backlog, processed, failed, paused",
		manager: true,
		about: `One line per domain, sorted.

Columns: domain, leased (true or false), offset (in flight, or -),
backlog (queued offsets), processed, failed (terminal offsets), paused.`,
		run: domains,
	},
	{
		name:    "leases",
		summary: "the leases in flight",
		manager: true,
		about: `One line per lease in flight, sorted by domain, as the journal left it:
an expiry in the past is reported as is (the Manager that opens the journal
next revokes it when the domain is touched).

Columns: domain, offset, token, fence, acquired (first grant of the
offset), expires (or - for never), retries (failed attempts so far).`,
		run: leases,
	},
	{
		name:    "dead",
		summary: "the dead letters, with their causes",
		manager: true,
		about: `One line per failed offset, sorted by domain then offset.

Columns: domain, offset, attempts, at (when it failed), cause.`,
		run: dead,
	},
	{
		name:    "dump",
		summary: "every record after the snapshot, one per line",
		about: `One line per record after the snapshot, in sequence order. The records are
decoded but not replayed, so dump shows records that verify rejects.

Columns: seq, kind, domain, offset (or -), token (or -; a Forgotten
record's carries only the domain's last fence), attempt, retries, front (an
Enqueued record went to the front), at (or -, where the Manager read no
clock), acquired, expires (or -), cause (or -), monotonic (a Settings
record: the records after it were written WithMonotonicOffsets), not_before
(an Enqueued record's schedule, a Requeued record's retry delay end, or -),
key (an Append's idempotency key, or -), payload (the bytes of an Enqueued
record's payload, or - for none). See worklease.Record for what each kind
of record holds.`,
		run: dump,
	},
	{
		name:    "payloads",
		summary: "the payloads the journal holds: domain, offset, state, bytes",
		manager: true,
		about: `One line per offset stored with a payload that has not succeeded yet,
sorted by domain, then in the domain's order: the offset in flight, the
backlog, then the dead letters. The bytes are read back from the records
that hold them, in the segments the snapshot keeps.

Columns: domain, offset, state (leased, queued or failed), bytes.

With -domain and -offset, it writes that offset's payload to standard
output instead, byte for byte and nothing else; with -json, one object
with the domain, offset, state, bytes and payload_base64. Exit status 1 if
the domain holds no payload for that offset (it succeeded, or was stored
without one).`,
		run: payloads,
	},
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// usage writes the tool's usage text.
func usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: %[1]s <command> [flags] <dir>

%[1]s inspects the journal directory <dir> of a worklease Manager (a
wal.Log). It opens it read-only: it creates, repairs and writes nothing,
and refuses a directory a running Manager holds.

Commands:
`, name)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `  help      this text, or a command's with: help <command>

Flags, for every command:
  -json       print JSON objects, one per line, instead of text
  -monotonic  replay as a Manager with worklease.WithMonotonicOffsets does.
              A journal records which option wrote it and replays by it
              anyway; the flag matters for one an older version of the
              package wrote with the option, which records nothing (dump
              ignores it)
  -domain, -offset
              the offset whose payload payloads writes
  -h          print the command's usage and columns

Text output is tab-separated, after a header line naming the columns; "-"
means none; a text field that is empty, "-", starts with a double quote or
holds an unprintable character is printed as a quoted Go string; times are
RFC 3339 in UTC. In JSON, a domain, cause or directory name that is not
valid UTF-8 is written as base64 under its key with "_base64" added
(domain_base64, cause_base64, dir_base64), so that its bytes read back
exactly.

Exit status: 0 success, 1 the journal cannot be read (corrupt, a record that
does not replay, missing), 2 usage error.
`)
}

// commandUsage writes c's usage text.
func commandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: %s %s [-json] <dir>\n\n%s\n\nFlags:\n  -json       print JSON objects, one per line, instead of text\n", name, c.name, c.about)
	if c.manager {
		fmt.Fprintf(w, "  -monotonic  replay as a Manager with worklease.WithMonotonicOffsets does (see -h)\n")
	}
}

// run is main with its arguments, output and exit status made explicit, so
// that tests can run it.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: no command\n\n", name)
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if args[0] == "help" && len(args) > 1 {
			c := lookup(args[1])
			if c == nil || len(args) > 2 {
				fmt.Fprintf(stderr, "%s: help: unknown command %q\n\n", name, strings.Join(args[1:], " "))
				usage(stderr)
				return exitUsage
			}
			commandUsage(stdout, c)
			return exitOK
		}
		usage(stdout)
		return exitOK
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", name, args[0])
		usage(stderr)
		return exitUsage
	}

	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are written below
	asJSON := fs.Bool("json", false, "")
	monotonic := fs.Bool("monotonic", false, "")
	domain := fs.String("domain", "", "")
	offset := fs.Int64("offset", -1, "")
	dirs, err := parseInterspersed(fs, args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		commandUsage(stdout, c)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "%s %s: %v\n\n", name, c.name, err)
		commandUsage(stderr, c)
		return exitUsage
	case len(dirs) != 1:
		fmt.Fprintf(stderr, "%s %s: want one journal directory, got %d arguments\n\n", name, c.name, len(dirs))
		commandUsage(stderr, c)
		return exitUsage
	}

	bw := bufio.NewWriter(stdout)
	p := &printer{w: bw, warn: stderr, json: *asJSON, domain: *domain, offset: *offset}
	err = runCommand(c, dirs[0], *monotonic, p)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s %s: %v\n", name, c.name, dirs[0], err)
		return exitError
	}
	return exitOK
}

// parseInterspersed parses flags wherever they are among the arguments, so
// that "verify <dir> -json" works as well as "verify -json <dir>", and
// returns the other arguments. After "--" everything is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if n := len(args) - fs.NArg(); n > 0 && args[n-1] == "--" {
			return append(rest, fs.Args()...), nil
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		rest, args = append(rest, args[0]), args[1:]
	}
}

// runCommand opens dir, runs c on it and closes it. monotonic builds the
// Manager WithMonotonicOffsets.
func runCommand(c *command, dir string, monotonic bool, p *printer) (err error) {
	j, err := openJournal(dir, c.manager, monotonic)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := j.close(); err == nil {
			err = cerr
		}
	}()
	if err := c.run(j, p); err != nil {
		return err
	}
	return p.err
}

// A journal is an open journal directory: its read-only log and, for the
// commands that need it, the Manager rebuilt from it.
type journal struct {
	dir string
	log *wal.Log
	m   *worklease.Manager // nil unless asked for

	// What the Manager's replay saw.
	snapshotBytes int64 // the snapshot file's size; 0 without one
	records       int   // records replayed after the snapshot
	kinds         map[worklease.EventKind]int
}

// frozenClock reads as the zero time, always. A Manager on it never finds a
// lease expired, since every lease expiry is later, so asking it questions
// journals nothing: an expiry is the only transition a read makes.
type frozenClock struct{}

func (frozenClock) Now() time.Time { return time.Time{} }

// openJournal opens dir read-only and, if manager is set, rebuilds the
// Manager from it, WithMonotonicOffsets if monotonic is set.
func openJournal(dir string, manager, monotonic bool) (*journal, error) {
	l, err := wal.Open(dir, wal.WithoutLock())
	if err != nil {
		return nil, err
	}
	j := &journal{dir: dir, log: l, kinds: make(map[worklease.EventKind]int)}
	if l.Recovery().SnapshotSeq > 0 {
		fi, err := os.Stat(filepath.Join(dir, "snapshot"))
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		j.snapshotBytes = fi.Size()
	}
	if !manager {
		return j, nil
	}
	opts := []worklease.Option{worklease.WithJournal(tap{l, j}), worklease.WithClock(frozenClock{})}
	if monotonic {
		opts = append(opts, worklease.WithMonotonicOffsets())
	}
	m, err := worklease.New(opts...)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	j.m = m
	return j, nil
}

// close closes the Manager, which closes the log, or the log.
func (j *journal) close() error {
	if j.m != nil {
		return j.m.Close()
	}
	return j.log.Close()
}

// tap is the read-only log as the Manager's journal, counting the records
// the Manager replays.
type tap struct {
	*wal.Log
	j *journal
}

// ReplayRecords implements worklease.Journal.
func (t tap) ReplayRecords(restore func(snapshot []byte) error, apply func(seq uint64, rec worklease.Record) error) error {
	return t.Log.ReplayRecords(restore, func(seq uint64, rec worklease.Record) error {
		t.j.records++
		t.j.kinds[rec.Kind]++
		return apply(seq, rec)
	})
}

// journaledKinds are the kinds of record a Manager journals, in kind order.
var journaledKinds = []worklease.EventKind{
	worklease.EventAcquired, worklease.EventEnqueued, worklease.EventProcessed,
	worklease.EventRetrying, worklease.EventDeadLettered, worklease.EventExpired,
	worklease.EventRequeued, worklease.EventExtended, worklease.EventKilled,
	worklease.EventRedriven, worklease.EventReleased, worklease.EventPaused,
	worklease.EventResumed, worklease.EventForgotten, worklease.RecordSettings,
}

// verifyReport is verify's output.
type verifyReport struct {
	Dir           *string   `json:"dir,omitempty"`
	DirBase64     []byte    `json:"dir_base64,omitempty"`
	Status        string    `json:"status"`
	Segments      int       `json:"segments"`
	LogBytes      int64     `json:"log_bytes"`
	SnapshotSeq   uint64    `json:"snapshot_seq"`
	SnapshotBytes int64     `json:"snapshot_bytes"`
	LastSeq       uint64    `json:"last_seq"`
	Records       int       `json:"records"`
	Domains       int       `json:"domains"`
	Torn          *tornTail `json:"torn_tail,omitempty"`
	Leftover      []string  `json:"leftover,omitempty"`
}

type tornTail struct {
	File   string `json:"file"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason"`
}

func verify(j *journal, p *printer) error {
	ds, err := j.m.Domains()
	if err != nil {
		return err
	}
	rc, st := j.log.Recovery(), j.log.Stats()
	r := verifyReport{
		Status:        "ok",
		Segments:      st.Segments,
		LogBytes:      st.LogBytes,
		SnapshotSeq:   rc.SnapshotSeq,
		SnapshotBytes: j.snapshotBytes,
		LastSeq:       rc.LastSeq,
		Records:       j.records,
		Domains:       len(ds),
		Leftover:      rc.Removed,
	}
	r.Dir, r.DirBase64 = jsonText(j.dir)
	if t := rc.Torn; t != nil {
		r.Torn = &tornTail{File: t.File, Offset: t.Offset, Bytes: t.Bytes, Reason: t.Reason.Error()}
	}
	if p.json {
		p.object(r)
		return nil
	}
	torn := tornTail{File: "-"}
	if r.Torn != nil {
		torn = *r.Torn
	}
	leftover := "-"
	if len(r.Leftover) > 0 {
		leftover = strings.Join(r.Leftover, " ")
	}
	p.row("key", "value")
	p.row("dir", text(j.dir))
	p.row("status", r.Status)
	p.row("segments", strconv.Itoa(r.Segments))
	p.row("log_bytes", strconv.FormatInt(r.LogBytes, 10))
	p.row("snapshot_seq", strconv.FormatUint(r.SnapshotSeq, 10))
	p.row("snapshot_bytes", strconv.FormatInt(r.SnapshotBytes, 10))
	p.row("last_seq", strconv.FormatUint(r.LastSeq, 10))
	p.row("records", strconv.Itoa(r.Records))
	p.row("domains", strconv.Itoa(r.Domains))
	p.row("torn_file", torn.File)
	p.row("torn_offset", optional(torn.Offset, r.Torn != nil))
	p.row("torn_bytes", optional(torn.Bytes, r.Torn != nil))
	p.row("torn_reason", optionalText(torn.Reason))
	p.row("leftover", leftover)
	return nil
}

// statsReport is stats' output.
type statsReport struct {
	Segments      int            `json:"segments"`
	LogBytes      int64          `json:"log_bytes"`
	SnapshotSeq   uint64         `json:"snapshot_seq"`
	SnapshotBytes int64          `json:"snapshot_bytes"`
	LastSeq       uint64         `json:"last_seq"`
	Records       int            `json:"records"`
	Kinds         map[string]int `json:"records_by_kind"`
	Domains       int            `json:"domains"`
	Leased        int            `json:"leased"`
	Paused        int            `json:"paused"`
	Queued        int            `json:"queued"`
	Processed     int64          `json:"processed"`
	Failed        int64          `json:"failed"`
}

func stats(j *journal, p *printer) error {
	rc, st := j.log.Recovery(), j.log.Stats()
	r := statsReport{
		Segments:      st.Segments,
		LogBytes:      st.LogBytes,
		SnapshotSeq:   rc.SnapshotSeq,
		SnapshotBytes: j.snapshotBytes,
		LastSeq:       rc.LastSeq,
		Records:       j.records,
		Kinds:         make(map[string]int, len(journaledKinds)),
	}
	for _, k := range journaledKinds {
		r.Kinds[k.String()] = j.kinds[k]
	}
	skipped, err := eachDomain(j.m, p, func(domain string, info worklease.DomainInfo) {
		r.Domains++
		if info.Leased {
			r.Leased++
		}
		if info.Paused {
			r.Paused++
		}
		r.Queued += len(info.Backlog)
		r.Processed += info.Processed
		r.Failed += info.Failed
	})
	if err != nil {
		return err
	}
	r.Domains += skipped
	if p.json {
		p.object(r) // encoding/json sorts the map's keys
		return nil
	}
	p.row("key", "value")
	p.row("segments", strconv.Itoa(r.Segments))
	p.row("log_bytes", strconv.FormatInt(r.LogBytes, 10))
	p.row("snapshot_seq", strconv.FormatUint(r.SnapshotSeq, 10))
	p.row("snapshot_bytes", strconv.FormatInt(r.SnapshotBytes, 10))
	p.row("last_seq", strconv.FormatUint(r.LastSeq, 10))
	p.row("records", strconv.Itoa(r.Records))
	for _, k := range journaledKinds {
		p.row("records."+k.String(), strconv.Itoa(r.Kinds[k.String()]))
	}
	p.row("domains", strconv.Itoa(r.Domains))
	p.row("leased", strconv.Itoa(r.Leased))
	p.row("paused", strconv.Itoa(r.Paused))
	p.row("queued", strconv.Itoa(r.Queued))
	p.row("processed", strconv.FormatInt(r.Processed, 10))
	p.row("failed", strconv.FormatInt(r.Failed, 10))
	return nil
}

// eachDomain calls f with every domain of m, sorted, and its state. A
// journal written before domains were bounded may hold a domain that
// Inspect refuses (the empty one, or one longer than
// worklease.MaxDomainLen): eachDomain names it on p's warning writer,
// leaves it out and counts it in skipped.
func eachDomain(m *worklease.Manager, p *printer, f func(domain string, info worklease.DomainInfo)) (skipped int, err error) {
	ds, err := m.Domains()
	if err != nil {
		return 0, err
	}
	for _, d := range ds {
		info, err := m.Inspect(d)
		if errors.Is(err, worklease.ErrInvalidDomain) {
			p.warnf("domain %s is not shown: no call accepts it now (%v)", shortText(d), worklease.ErrInvalidDomain)
			skipped++
			continue
		}
		if err != nil {
			return skipped, err
		}
		f(d, info)
	}
	return skipped, nil
}

// shortText is text(s) for a string that may be huge: a quoted prefix and
// its length.
func shortText(s string) string {
	const show = 64
	if len(s) <= show {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(strings.ToValidUTF8(s[:show], "")), len(s))
}

// domainRow is one line of domains.
type domainRow struct {
	Domain    *string `json:"domain,omitempty"`
	Base64    []byte  `json:"domain_base64,omitempty"`
	Leased    bool    `json:"leased"`
	Offset    *int64  `json:"offset,omitempty"` // in flight
	Backlog   int     `json:"backlog"`
	Processed int64   `json:"processed"`
	Failed    int64   `json:"failed"`
	Paused    bool    `json:"paused"`
}

func domains(j *journal, p *printer) error {
	if !p.json {
		p.row("domain", "leased", "offset", "backlog", "processed", "failed", "paused")
	}
	_, err := eachDomain(j.m, p, func(domain string, info worklease.DomainInfo) {
		r := domainRow{Leased: info.Leased, Backlog: len(info.Backlog),
			Processed: info.Processed, Failed: info.Failed, Paused: info.Paused}
		r.Domain, r.Base64 = jsonText(domain)
		if info.Leased {
			r.Offset = &info.Lease.Offset
		}
		if p.json {
			p.object(r)
			return
		}
		p.row(text(domain), strconv.FormatBool(r.Leased), optional(info.Lease.Offset, r.Leased),
			strconv.Itoa(r.Backlog), strconv.FormatInt(r.Processed, 10), strconv.FormatInt(r.Failed, 10),
			strconv.FormatBool(r.Paused))
	})
	return err
}

// leaseRow is one line of leases.
type leaseRow struct {
	Domain   *string         `json:"domain,omitempty"`
	Base64   []byte          `json:"domain_base64,omitempty"`
	Offset   int64           `json:"offset"`
	Token    worklease.Token `json:"token"`
	Fence    uint64          `json:"fence"`
	Acquired time.Time       `json:"acquired,omitzero"`
	Expires  time.Time       `json:"expires,omitzero"`
	Retries  int             `json:"retries"`
}

func leases(j *journal, p *printer) error {
	ls, err := j.m.Leases()
	if err != nil {
		return err
	}
	if !p.json {
		p.row("domain", "offset", "token", "fence", "acquired", "expires", "retries")
	}
	for _, l := range ls {
		r := leaseRow{Offset: l.Offset, Token: l.Token, Fence: l.Token.Fence(),
			Acquired: utc(l.AcquiredAt), Expires: utc(l.ExpiresAt), Retries: l.RetryCount}
		r.Domain, r.Base64 = jsonText(l.Domain)
		if p.json {
			p.object(r)
			continue
		}
		p.row(text(l.Domain), strconv.FormatInt(r.Offset, 10), r.Token.String(), strconv.FormatUint(r.Fence, 10),
			timeText(r.Acquired), timeText(r.Expires), strconv.Itoa(r.Retries))
	}
	return nil
}

// deadRow is one line of dead.
type deadRow struct {
	Domain      *string   `json:"domain,omitempty"`
	Base64      []byte    `json:"domain_base64,omitempty"`
	Offset      int64     `json:"offset"`
	Attempts    int       `json:"attempts"`
	At          time.Time `json:"at,omitzero"`
	Cause       *string   `json:"cause,omitempty"`
	CauseBase64 []byte    `json:"cause_base64,omitempty"`
}

func dead(j *journal, p *printer) error {
	dls, err := j.m.DeadLetters("")
	if err != nil {
		return err
	}
	if !p.json {
		p.row("domain", "offset", "attempts", "at", "cause")
	}
	for _, dl := range dls {
		r := deadRow{Offset: dl.Offset, Attempts: dl.Attempts, At: utc(dl.At)}
		r.Domain, r.Base64 = jsonText(dl.Domain)
		var cause string
		if dl.Cause != nil {
			cause = dl.Cause.Error()
		}
		if cause != "" {
			r.Cause, r.CauseBase64 = jsonText(cause)
		}
		if p.json {
			p.object(r)
			continue
		}
		p.row(text(dl.Domain), strconv.FormatInt(r.Offset, 10), strconv.Itoa(r.Attempts), timeText(r.At), optionalText(cause))
	}
	return nil
}

// dumpRow is one line of dump: a worklease.Record and its sequence number.
type dumpRow struct {
	Seq       uint64          `json:"seq"`
	Kind      string          `json:"kind"`
	Domain    *string         `json:"domain,omitempty"`
	Base64    []byte          `json:"domain_base64,omitempty"`
	Offset    int64           `json:"offset"` // -1: none
	Token     worklease.Token `json:"token,omitzero"`
	Attempt   int             `json:"attempt"`
	Retries   int             `json:"retries"`
	Front     bool            `json:"front,omitempty"`
	At        time.Time       `json:"at,omitzero"`
	Acquired  time.Time       `json:"acquired,omitzero"`
	Expires   time.Time       `json:"expires,omitzero"`
	Cause     *string         `json:"cause,omitempty"`
	CauseB64  []byte          `json:"cause_base64,omitempty"`
	Monotonic bool            `json:"monotonic,omitempty"`
	NotBefore time.Time       `json:"not_before,omitzero"`
	Key       *string         `json:"key,omitempty"`
	KeyB64    []byte          `json:"key_base64,omitempty"`
	Payload   *int            `json:"payload_bytes,omitempty"` // nil: none
}

func dump(j *journal, p *printer) error {
	if !p.json {
		p.row("seq", "kind", "domain", "offset", "token", "attempt", "retries", "front", "at", "acquired", "expires", "cause", "monotonic",
			"not_before", "key", "payload")
	}
	return j.log.ReplayRecords(
		func([]byte) error { return nil }, // the snapshot is state, not records
		func(seq uint64, rec worklease.Record) error {
			r := dumpRow{Seq: seq, Kind: rec.Kind.String(), Offset: rec.Offset, Token: rec.Token,
				Attempt: rec.Attempt, Retries: rec.Retries, Front: rec.Front, At: utc(rec.At),
				Acquired: utc(rec.AcquiredAt), Expires: utc(rec.ExpiresAt), Monotonic: rec.Monotonic}
			r.Domain, r.Base64 = jsonText(rec.Domain)
			if rec.Cause != "" {
				r.Cause, r.CauseB64 = jsonText(rec.Cause)
			}
			r.NotBefore = utc(rec.NotBefore)
			if rec.Key != "" {
				r.Key, r.KeyB64 = jsonText(rec.Key)
			}
			size := "-"
			if rec.Payload != nil {
				n := len(rec.Payload)
				r.Payload, size = &n, strconv.Itoa(n)
			}
			if p.json {
				p.object(r)
				return p.err
			}
			tok := "-"
			if !r.Token.IsZero() {
				tok = r.Token.String()
			}
			p.row(strconv.FormatUint(r.Seq, 10), r.Kind, text(rec.Domain), optional(r.Offset, r.Offset >= 0), tok,
				strconv.Itoa(r.Attempt), strconv.Itoa(r.Retries), strconv.FormatBool(r.Front),
				timeText(r.At), timeText(r.Acquired), timeText(r.Expires), optionalText(rec.Cause),
				strconv.FormatBool(r.Monotonic), timeText(r.NotBefore), optionalText(rec.Key), size)
			return p.err
		})
}

// payloadRow is one line of payloads.
type payloadRow struct {
	Domain *string `json:"domain,omitempty"`
	Base64 []byte  `json:"domain_base64,omitempty"`
	Offset int64   `json:"offset"`
	State  string  `json:"state"`
	Bytes  int     `json:"bytes"`
}

func payloads(j *journal, p *printer) error {
	if p.domain != "" || p.offset >= 0 {
		return payload(j, p)
	}
	if !p.json {
		p.row("domain", "offset", "state", "bytes")
	}
	var err error
	_, derr := eachDomain(j.m, p, func(domain string, info worklease.DomainInfo) {
		type held struct {
			offset int64
			state  string
		}
		var offs []held
		if info.Leased {
			offs = append(offs, held{info.Lease.Offset, "leased"})
		}
		for _, off := range info.Backlog {
			offs = append(offs, held{off, "queued"})
		}
		if info.Failed > 0 {
			dls, e := j.m.DeadLetters(domain)
			if e != nil {
				err = cmp.Or(err, e)
				return
			}
			for _, dl := range dls {
				offs = append(offs, held{dl.Offset, "failed"})
			}
		}
		for _, h := range offs {
			data, e := j.m.Payload(domain, h.offset)
			if e != nil {
				err = cmp.Or(err, e)
				return
			}
			if data == nil {
				continue
			}
			r := payloadRow{Offset: h.offset, State: h.state, Bytes: len(data)}
			r.Domain, r.Base64 = jsonText(domain)
			if p.json {
				p.object(r)
				continue
			}
			p.row(text(domain), strconv.FormatInt(h.offset, 10), h.state, strconv.Itoa(len(data)))
		}
	})
	return cmp.Or(derr, err)
}

// stateOf is the state of offset, which domain holds with a payload, as
// payloads names it.
func stateOf(m *worklease.Manager, domain string, offset int64) string {
	info, err := m.Inspect(domain)
	switch {
	case err != nil:
		return ""
	case info.Leased && info.Lease.Offset == offset:
		return "leased"
	case slices.Contains(info.Backlog, offset):
		return "queued"
	}
	return "failed"
}

// payload is payloads with -domain and -offset: one payload's bytes.
func payload(j *journal, p *printer) error {
	if p.domain == "" || p.offset < 0 {
		return errors.New("name the payload with both -domain and -offset")
	}
	data, err := j.m.Payload(p.domain, p.offset)
	if err != nil {
		return err
	}
	if data == nil {
		return fmt.Errorf("%s/%d holds no payload", text(p.domain), p.offset)
	}
	if p.json {
		r := struct {
			payloadRow
			Payload []byte `json:"payload_base64"`
		}{payloadRow: payloadRow{Offset: p.offset, State: stateOf(j.m, p.domain, p.offset), Bytes: len(data)}, Payload: data}
		r.Domain, r.Base64 = jsonText(p.domain)
		p.object(r)
		return nil
	}
	if p.err == nil {
		_, p.err = p.w.Write(data)
	}
	return nil
}

// printer writes a command's output, as text rows or JSON objects. The
// first write error sticks in err.
type printer struct {
	w    *bufio.Writer
	warn io.Writer // where warnings go: stderr
	json bool
	err  error

	// payloads' -domain and -offset; "" and -1 if not given.
	domain string
	offset int64
}

// warnf writes a warning line, prefixed with the tool's name.
func (p *printer) warnf(format string, args ...any) {
	fmt.Fprintf(p.warn, name+": "+format+"\n", args...)
}

// row writes fields as one tab-separated line. Fields must already be
// formatted: numbers, or strings passed through text.
func (p *printer) row(fields ...string) {
	if p.err != nil {
		return
	}
	for i, f := range fields {
		if i > 0 {
			p.w.WriteByte('\t')
		}
		p.w.WriteString(f)
	}
	_, p.err = p.w.WriteString("\n")
}

// object writes v as one line of JSON.
func (p *printer) object(v any) {
	if p.err != nil {
		return
	}
	enc := json.NewEncoder(p.w)
	enc.SetEscapeHTML(false)
	p.err = enc.Encode(v)
}

// text formats a text field for a row: as it is, unless it could be taken
// for something else (empty, "-", or starting with a quote) or would break
// the line or the columns (an unprintable character, such as a tab or a
// newline, or bytes that are not UTF-8); then as a quoted Go string.
func text(s string) string {
	if s == "" || s == "-" || s[0] == '"' || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// jsonText returns s as a JSON text field and its "_base64" twin: s, or,
// if s is not valid UTF-8 (which a JSON string cannot hold: encoding/json
// would replace the bad bytes with U+FFFD), its bytes, which encoding/json
// writes in base64.
func jsonText(s string) (*string, []byte) {
	if utf8.ValidString(s) {
		return &s, nil
	}
	return nil, []byte(s)
}

// optionalText is text, with "-" for the empty string.
func optionalText(s string) string {
	if s == "" {
		return "-"
	}
	return text(s)
}

// optional formats n, or "-" unless ok.
func optional(n int64, ok bool) string {
	if !ok {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// timeText formats a time, "-" for the zero time.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// utc returns t in UTC, keeping the zero time zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
