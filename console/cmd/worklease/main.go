// Command worklease looks at and repairs the domains of a worklease
// backend: a PostgreSQL database (-dsn) or, read-only, a journal directory
// (-wal), which a running Manager may hold.
//
//	worklease <command> [flags] [arguments]
//
// The commands:
//
//	console        serve the web console (see package console) on -addr
//	domains        the domains, filtered by -state and -prefix
//	leases         the leases in flight, the soonest to expire first
//	dead           the dead letters (-domain, -order, -payloads)
//	inspect D      one domain: its lease, backlog and dead letters
//	redrive D O    run dead letter O of domain D again, first in its line
//	kill D O       make offset O of domain D a dead letter (-reason)
//	pause D        stop domain D granting leases
//	resume D       let domain D grant leases again
//	force-release D  take domain D's lease back from its holder
//
// Every command takes -dsn URL (with -schema, "worklease" by default) or
// -wal DIR. The admin commands (redrive, kill, pause, resume,
// force-release) need a backend that takes a second writer: PostgreSQL,
// whose every process shares the database. A journal has one writer, the
// Manager that holds it, which keeps its state in memory and would not see
// a change written beside it: against -wal they fail, and so does the
// console's every action (it runs read-only). A journal is read without a
// lock (wal.WithoutLock), as the Manager left it at some moment; the
// console reads it again at most every two seconds.
//
// Lists print every page, or with -limit that many rows at most. Output is
// tab-separated text with a header line, where a domain, cause or payload
// that is not printable UTF-8 is a quoted Go string literal; with -json,
// one JSON object per line, where such a field is under its name with
// "_base64" added, in standard base64. The exit status is 0 on success, 1
// on an error of the backend or a refused action, and 2 for a usage error.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/console"
	"github.com/worklease/worklease/pg"
	"github.com/worklease/worklease/wal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const usage = `usage: worklease <command> [flags] [arguments]

commands: console, domains, leases, dead, inspect DOMAIN, redrive DOMAIN OFFSET,
kill DOMAIN OFFSET, pause DOMAIN, resume DOMAIN, force-release DOMAIN

every command takes -dsn URL [-schema NAME] (PostgreSQL) or -wal DIR (a journal,
read-only); worklease <command> -h lists its flags.
`

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("worklease "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "the PostgreSQL database's URL")
	schema := fs.String("schema", pg.DefaultSchema, "the schema of the PostgreSQL backend")
	dir := fs.String("wal", "", "a journal directory, read-only")
	asJSON := fs.Bool("json", false, "print JSON, one object per line")
	limit := fs.Int("limit", 0, "print at most this many rows (0: all)")
	state := fs.String("state", "", "domains: only those in every state of this list (leased, paused, parked, dead-lettered, backlogged)")
	prefix := fs.String("prefix", "", "domains: only those whose key starts with this")
	domain := fs.String("domain", "", "dead: only this domain's dead letters")
	order := fs.String("order", "by-domain", "dead: by-domain or newest-first")
	payloads := fs.Bool("payloads", false, "dead: print the payloads")
	reason := fs.String("reason", "killed by an operator", "kill: the dead letter's cause")
	addr := fs.String("addr", "127.0.0.1:8080", "console: the address to listen on")
	readOnly := fs.Bool("read-only", false, "console: offer no action")
	title := fs.String("title", "worklease", "console: the name its pages show")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if (*dsn == "") == (*dir == "") {
		fmt.Fprintln(stderr, "worklease: give one of -dsn or -wal")
		return exitUsage
	}
	c := &cli{out: stdout, json: *asJSON, limit: *limit}
	src, err := openSource(ctx, *dsn, *schema, *dir)
	if err != nil {
		fmt.Fprintln(stderr, "worklease:", err)
		return exitError
	}
	defer src.close()
	c.b = src.backend
	pos := fs.Args()
	arity := map[string]int{"console": 0, "domains": 0, "leases": 0, "dead": 0, "inspect": 1, "redrive": 2, "kill": 2,
		"pause": 1, "resume": 1, "force-release": 1}
	n, ok := arity[cmd]
	switch {
	case !ok:
		fmt.Fprintf(stderr, "worklease: no command %q\n%s", cmd, usage)
		return exitUsage
	case len(pos) != n:
		fmt.Fprintf(stderr, "worklease %s: want %d arguments, got %d\n", cmd, n, len(pos))
		return exitUsage
	case n == 2:
		if _, err := strconv.ParseInt(pos[1], 10, 64); err != nil {
			fmt.Fprintf(stderr, "worklease %s: offset %q is not a number\n", cmd, pos[1])
			return exitUsage
		}
	}
	if n > 0 && src.readOnly && cmd != "inspect" {
		fmt.Fprintf(stderr, "worklease %s: a journal has one writer, the Manager that holds it, which keeps its state in memory "+
			"and would not see a change written beside it: make the change through that Manager (or against PostgreSQL, which takes many)\n", cmd)
		return exitError
	}
	switch cmd {
	case "console":
		err = serveConsole(ctx, src, *addr, *readOnly, *title, stderr)
	case "domains":
		var st worklease.DomainState
		if st, err = worklease.ParseDomainState(*state); err != nil {
			fmt.Fprintln(stderr, "worklease domains:", err)
			return exitUsage
		}
		err = c.domains(ctx, worklease.DomainQuery{State: st, Prefix: *prefix})
	case "leases":
		err = c.leases(ctx)
	case "dead":
		q := worklease.DeadLetterQuery{Domain: *domain, Payloads: *payloads}
		switch *order {
		case "by-domain":
		case "newest-first":
			q.Order = worklease.DeadLettersNewestFirst
		default:
			fmt.Fprintf(stderr, "worklease dead: -order %q: want by-domain or newest-first\n", *order)
			return exitUsage
		}
		err = c.dead(ctx, q)
	case "inspect":
		err = c.inspect(ctx, pos[0])
	default:
		off, _ := strconv.ParseInt(pos[len(pos)-1], 10, 64)
		err = c.admin(ctx, cmd, pos[0], off, *reason)
	}
	if err != nil {
		fmt.Fprintf(stderr, "worklease %s: %v\n", cmd, err)
		return exitError
	}
	return exitOK
}

// A source is the backend a command works on.
type source struct {
	backend  worklease.Backend
	readOnly bool // a journal
	close    func()
}

// openSource opens the PostgreSQL backend at dsn, or the journal in dir.
func openSource(ctx context.Context, dsn, schema, dir string) (*source, error) {
	if dsn != "" {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return nil, err
		}
		m, err := pg.OpenSchema(ctx, pool, schema)
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &source{backend: m, close: func() { _ = m.Close(); pool.Close() }}, nil
	}
	j := &journalView{dir: dir}
	if _, err := j.view(); err != nil {
		return nil, err
	}
	return &source{backend: j, readOnly: true, close: j.close}, nil
}

// serveConsole serves the console of src on addr until ctx is done.
func serveConsole(ctx context.Context, src *source, addr string, readOnly bool, title string, stderr io.Writer) error {
	opts := []console.Option{console.WithTitle(title)}
	if readOnly || src.readOnly {
		opts = append(opts, console.ReadOnly())
	}
	h, err := console.New(src.backend, opts...)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	fmt.Fprintf(stderr, "worklease: the console is at http://%s/ (no authentication of its own: keep it on a private address)\n", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// journalView is a journal directory as a read-only backend: a Manager
// replaying the journal, read again when a call comes more than
// viewEvery after the last read. Its calls that would change the state
// are those of a Manager on a read-only log, which refuses them.
type journalView struct {
	worklease.Backend // the latest view's, for the calls it does not read again

	dir string
	mu  sync.Mutex // guards m and at
	m   *worklease.Manager
	at  time.Time
}

// viewEvery is how long a view of a journal is kept.
const viewEvery = 2 * time.Second

// frozenClock is the view's clock: the zero time, so that no lease is
// found expired, which would write a record.
type frozenClock struct{}

func (frozenClock) Now() time.Time { return time.Time{} }

// view returns the current view of the journal, reading it again if it is
// old.
func (j *journalView) view() (worklease.Backend, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m != nil && time.Since(j.at) < viewEvery {
		return j.m.Backend(), nil
	}
	l, err := wal.Open(j.dir, wal.WithoutLock())
	if err != nil {
		return nil, err
	}
	m, err := worklease.New(worklease.WithJournal(l), worklease.WithClock(frozenClock{}))
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	if j.m != nil {
		_ = j.m.Close()
	}
	j.m, j.at = m, time.Now()
	if j.Backend == nil {
		j.Backend = m.Backend()
	}
	return m.Backend(), nil
}

func (j *journalView) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m != nil {
		_ = j.m.Close()
	}
}

func (j *journalView) Inspect(ctx context.Context, d string) (worklease.DomainInfo, error) {
	b, err := j.view()
	if err != nil {
		return worklease.DomainInfo{}, err
	}
	return b.Inspect(ctx, d)
}

func (j *journalView) ListDomains(ctx context.Context, q worklease.DomainQuery) (worklease.DomainPage, error) {
	b, err := j.view()
	if err != nil {
		return worklease.DomainPage{}, err
	}
	return b.ListDomains(ctx, q)
}

func (j *journalView) ListLeases(ctx context.Context, q worklease.LeaseQuery) (worklease.LeasePage, error) {
	b, err := j.view()
	if err != nil {
		return worklease.LeasePage{}, err
	}
	return b.ListLeases(ctx, q)
}

func (j *journalView) ListDeadLetters(ctx context.Context, q worklease.DeadLetterQuery) (worklease.DeadLetterPage, error) {
	b, err := j.view()
	if err != nil {
		return worklease.DeadLetterPage{}, err
	}
	return b.ListDeadLetters(ctx, q)
}

func (j *journalView) InspectDeadLetter(ctx context.Context, d string, off int64) (worklease.DeadLetter, error) {
	b, err := j.view()
	if err != nil {
		return worklease.DeadLetter{}, err
	}
	return b.InspectDeadLetter(ctx, d, off)
}

func (j *journalView) Stats(ctx context.Context) (worklease.Stats, error) {
	b, err := j.view()
	if err != nil {
		return worklease.Stats{}, err
	}
	return b.Stats(ctx)
}

func (j *journalView) Totals(ctx context.Context) (worklease.Totals, error) {
	b, err := j.view()
	if err != nil {
		return worklease.Totals{}, err
	}
	return b.Totals(ctx)
}

// cli prints a command's rows.
type cli struct {
	b     worklease.Backend
	out   io.Writer
	json  bool
	limit int
	rows  int
	head  bool
}

// A field is a column of a row: its name and value.
type field struct {
	name  string
	value any
}

// row prints a row, and reports whether more may follow (-limit).
func (c *cli) row(fields ...field) bool {
	if c.limit > 0 && c.rows >= c.limit {
		return false
	}
	c.rows++
	if c.json {
		var b strings.Builder
		b.WriteByte('{')
		for i, f := range fields {
			if i > 0 {
				b.WriteByte(',')
			}
			name, v := f.name, f.value
			switch s := v.(type) {
			case []byte:
				v, name = base64.StdEncoding.EncodeToString(s), name+"_base64"
			case string:
				if !utf8.ValidString(s) {
					v, name = base64.StdEncoding.EncodeToString([]byte(s)), name+"_base64"
				}
			case time.Time:
				if s.IsZero() {
					v = nil
				} else {
					v = s.UTC().Format(time.RFC3339Nano)
				}
			}
			k, _ := json.Marshal(name)
			val, _ := json.Marshal(v)
			b.Write(k)
			b.WriteByte(':')
			b.Write(val)
		}
		b.WriteString("}\n")
		_, _ = io.WriteString(c.out, b.String())
		return true
	}
	if !c.head {
		c.head = true
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		fmt.Fprintln(c.out, strings.Join(names, "\t"))
	}
	vals := make([]string, len(fields))
	for i, f := range fields {
		vals[i] = text(f.value)
	}
	fmt.Fprintln(c.out, strings.Join(vals, "\t"))
	return true
}

// text returns a value as text output prints it.
func text(v any) string {
	switch s := v.(type) {
	case nil:
		return "-"
	case []byte:
		if s == nil {
			return "-"
		}
		return text(string(s))
	case string:
		if s == "" || s == "-" || strings.HasPrefix(s, `"`) || !printable(s) {
			return strconv.Quote(s)
		}
		return s
	case time.Time:
		if s.IsZero() {
			return "-"
		}
		return s.UTC().Format(time.RFC3339)
	case error:
		return text(s.Error())
	}
	return fmt.Sprint(v)
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '\t' {
			return false
		}
	}
	return true
}

func causeOf(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}

func (c *cli) domains(ctx context.Context, q worklease.DomainQuery) error {
	for {
		p, err := c.b.ListDomains(ctx, q)
		if err != nil {
			return err
		}
		for _, d := range p.Domains {
			var lease, expires any
			if d.Leased {
				lease, expires = d.Lease.Offset, d.Lease.ExpiresAt
			}
			var head any
			if d.Queued > 0 {
				head = d.Head
			}
			if !c.row(field{"domain", d.Domain}, field{"state", d.State().String()}, field{"lease", lease}, field{"expires", expires},
				field{"queued", d.Queued}, field{"head", head}, field{"dead_letters", d.DeadLetters}) {
				return nil
			}
		}
		if p.Next == "" {
			return nil
		}
		q.After = p.Next
	}
}

func (c *cli) leases(ctx context.Context) error {
	q := worklease.LeaseQuery{Limit: worklease.MaxPageLimit}
	for {
		p, err := c.b.ListLeases(ctx, q)
		if err != nil {
			return err
		}
		for _, l := range p.Leases {
			if !c.row(field{"domain", l.Domain}, field{"offset", l.Offset}, field{"token", l.Token.String()}, field{"fence", l.Token.Fence()},
				field{"attempt", l.RetryCount + 1}, field{"acquired", l.AcquiredAt}, field{"expires", l.ExpiresAt}) {
				return nil
			}
		}
		if p.Next == "" {
			return nil
		}
		q.After = p.Next
	}
}

func (c *cli) deadRow(dl worklease.DeadLetter, payloads bool) bool {
	fields := []field{{"domain", dl.Domain}, {"offset", dl.Offset}, {"attempts", dl.Attempts}, {"at", dl.At}, {"cause", causeOf(dl.Cause)}}
	if payloads {
		fields = append(fields, field{"payload", dl.Payload})
	}
	return c.row(fields...)
}

func (c *cli) dead(ctx context.Context, q worklease.DeadLetterQuery) error {
	q.Limit = worklease.MaxPageLimit
	for {
		p, err := c.b.ListDeadLetters(ctx, q)
		if err != nil {
			return err
		}
		for _, dl := range p.DeadLetters {
			if !c.deadRow(dl, q.Payloads) {
				return nil
			}
		}
		if p.Next == "" {
			return nil
		}
		q.After = p.Next
	}
}

func (c *cli) inspect(ctx context.Context, domain string) error {
	info, err := c.b.Inspect(ctx, domain)
	if err != nil {
		return err
	}
	var lease, token, expires, attempt any
	if info.Leased {
		lease, token, expires, attempt = info.Lease.Offset, info.Lease.Token.String(), info.Lease.ExpiresAt, info.Lease.RetryCount+1
	}
	var head any
	if len(info.Backlog) > 0 {
		head = info.Backlog[0]
	}
	c.row(field{"domain", domain}, field{"paused", info.Paused}, field{"lease", lease}, field{"token", token}, field{"attempt", attempt},
		field{"expires", expires}, field{"queued", len(info.Backlog)}, field{"head", head}, field{"processed", info.Processed},
		field{"dead_letters", info.Failed})
	if info.Failed == 0 {
		return nil
	}
	if !c.json {
		fmt.Fprintln(c.out)
	}
	c.head, c.rows = false, 0
	return c.dead(ctx, worklease.DeadLetterQuery{Domain: domain, Payloads: true})
}

func (c *cli) admin(ctx context.Context, cmd, domain string, offset int64, reason string) error {
	var h worklease.Head
	var err error
	switch cmd {
	case "redrive":
		h, err = c.b.Redrive(ctx, domain, offset)
	case "kill":
		h, err = c.b.Kill(ctx, domain, offset, reason)
	case "pause":
		err = c.b.Pause(ctx, domain)
	case "resume":
		h, err = c.b.Resume(ctx, domain)
	case "force-release":
		h, err = c.b.ForceRelease(ctx, domain)
	}
	if err != nil {
		return err
	}
	var next any
	if h.HasNext {
		next = h.Next
	}
	c.row(field{"domain", domain}, field{"done", cmd}, field{"next", next})
	return nil
}
