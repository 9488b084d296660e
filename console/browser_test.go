package console_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/console"
	"github.com/worklease/worklease/pg"
	"github.com/worklease/worklease/worker"
)

// screenshots is where TestBrowser writes its screenshots of the overview
// and a domain's page, if set: make screenshots writes docs/.
var screenshots = flag.String("screenshots", "", "write the browser test's screenshots (PNG) to this directory")

// chromium returns the path of a Chromium to drive, skipping t if there is
// none, or failing it under CI=true, where the test script installs one.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium found: the test script installs Debian's chromium package")
	}
	t.Skip("no Chromium found (apt-get install chromium): the browser tests skip")
	return ""
}

// newBrowser starts a headless Chromium for t, with a fresh profile, and
// returns a context that drives a tab of it. An alert, confirm or prompt
// dialog the page opens fails t (none should, but the confirmations of
// the actions the test accepts: see accept).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatal(err)
	}
	// Confirmations of the actions are accepted; any other dialog is a
	// script the page should not have run.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			if ev.Type != page.DialogTypeConfirm {
				t.Errorf("the page opened a %s dialog: %q", ev.Type, ev.Message)
			}
			if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				return
			}
		}
	}()
	return ctx
}

// A scenario is a backend with a worker Pool running on it, whose handler
// fails payloads "poison" until fixed, and records what it processed.
type scenario struct {
	b     worklease.Backend
	mu    sync.Mutex
	fixed bool
	done  map[string]bool // domain/offset
}

func (s *scenario) handle(_ context.Context, j worker.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if string(j.Payload) == "poison" && !s.fixed {
		return errors.New("poison <b>payload</b>")
	}
	s.done[fmt.Sprintf("%s/%d", j.Domain, j.Offset)] = true
	return nil
}

func (s *scenario) processed(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[key]
}

// startPool runs a Pool on b until t ends.
func startPool(t *testing.T, b worklease.Backend) *scenario {
	t.Helper()
	s := &scenario{b: b, done: map[string]bool{}}
	p, err := worker.New(b, s.handle, worker.WithWorkers(4), worker.WithQueueLimit(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = p.Run(ctx) }()
	t.Cleanup(func() {
		stop, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = p.Stop(stop)
		cancel()
		<-ran
	})
	return s
}

// waitFor waits until cond holds, or fails t after a minute: no assertion
// depends on how long anything takes, only on its happening.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBrowser drives the console in a headless Chromium, as an operator
// would, against the in-memory Manager and against PostgreSQL.
func TestBrowser(t *testing.T) {
	t.Run("Manager", func(t *testing.T) {
		m, err := worklease.New(worklease.WithMaxRetries(0), worklease.WithLeaseTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		browse(t, m.Backend(), *screenshots)
	})
	t.Run("Postgres", func(t *testing.T) {
		url := os.Getenv("WORKLEASE_PG_URL")
		if url == "" {
			if os.Getenv("CI") == "true" {
				t.Fatal("WORKLEASE_PG_URL is not set")
			}
			t.Skip("no PostgreSQL server: WORKLEASE_PG_URL is not set")
		}
		ctx := context.Background()
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		schema := fmt.Sprintf("console_browser_%d", time.Now().UnixNano())
		t.Cleanup(func() { _, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
		m, err := pg.OpenSchema(ctx, pool, schema, worklease.WithMaxRetries(0), worklease.WithLeaseTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		browse(t, m, "")
	})
}

// browse is the operator's session on b.
func browse(t *testing.T, b worklease.Backend, shots string) {
	ctx := context.Background()
	s := startPool(t, b)
	// Work for a few tenants; tenant-3's offset 2 is poison, and becomes a
	// dead letter (no retries).
	for d := 1; d <= 6; d++ {
		for off := int64(1); off <= 3; off++ {
			payload := []byte(fmt.Sprintf(`{"order":%d}`, off))
			if d == 3 && off == 2 {
				payload = []byte("poison")
			}
			if _, err := b.Enqueue(ctx, fmt.Sprintf("tenant-%d", d), off, payload); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "the poison dead-lettered", func() bool {
		_, err := b.InspectDeadLetter(ctx, "tenant-3", 2)
		return err == nil
	})

	c, err := console.New(b)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/leases/", http.StripPrefix("/ops/leases", c))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base := srv.URL + "/ops/leases/"

	bctx := newBrowser(t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.Search(sel)))
		if err != nil {
			t.Fatalf("the text of %s: %v", sel, err)
		}
		return v
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
		if err != nil {
			t.Fatalf("counting %s: %v", sel, err)
		}
		return n
	}
	screenshot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The overview.
	do("open the overview", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`[data-total="DeadLetters"]`)))
	if got := text(`[data-total="DeadLetters"]`); got != "1" {
		t.Errorf("the overview shows %q dead letters, want 1", got)
	}
	if shots != "" {
		// Let the live counts tick once, so that the rates show.
		do("the overview's counts", chromedp.Sleep(2500*time.Millisecond))
		screenshot("console-overview.png")
	}

	// Filter to the domains with dead letters, and open the one there.
	do("filter the domains", chromedp.Click(chromedp.CSS(`nav a[href="domains"]`)), chromedp.WaitVisible(chromedp.CSS(`select[name=state]`)),
		chromedp.SetValue(chromedp.CSS(`select[name=state]`), "dead-lettered"), chromedp.Submit(chromedp.CSS(`form.filters`)),
		chromedp.WaitVisible(chromedp.CSS(`td.domain a`)))
	if n := count("tbody tr"); n != 1 {
		t.Fatalf("%d domains with dead letters listed, want 1", n)
	}
	do("open tenant-3", chromedp.Click(chromedp.CSS(`td.domain a`)), chromedp.WaitVisible(chromedp.CSS(`td.cause`)))
	if cause, payload := text("td.cause"), text("td.payload"); cause != "poison <b>payload</b>" || payload != "poison" {
		t.Errorf("the dead letter shows cause %q, payload %q", cause, payload)
	}
	if shots != "" {
		screenshot("console-domain.png")
	}

	// Fix the handler, and redrive the dead letter: the Pool processes it.
	s.mu.Lock()
	s.fixed = true
	s.mu.Unlock()
	do("redrive it", chromedp.Click(chromedp.CSS(`#sel tbody input[type=checkbox]`)), chromedp.Click(chromedp.CSS(`#sel button[value=redrive]`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	if got := text(".notice"); got != "redrive: 1 of 1 done" {
		t.Errorf("after the redrive: %q", got)
	}
	// The handler marks the offset before the Pool ends its lease: wait for
	// the backend to count it, and the domain's last offset, processed.
	waitFor(t, "the redriven offset processed", func() bool {
		info, err := b.Inspect(ctx, "tenant-3")
		return s.processed("tenant-3/2") && err == nil && info.Processed == 3
	})
	do("reload tenant-3", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`dl`)))
	if got := text(`//dt[text()="Processed"]/following-sibling::dd[1]`); got != "3" {
		t.Errorf("tenant-3 shows %s processed, want 3", got)
	}
	if n := count("td.cause"); n != 0 {
		t.Errorf("tenant-3 shows %d dead letters after the redrive", n)
	}

	// A bulk redrive of 500.
	for i := range 500 {
		if _, err := b.Kill(ctx, fmt.Sprintf("bulk-%03d", i%50), int64(100+i), "operator"); err != nil {
			t.Fatal(err)
		}
	}
	do("select 500 dead letters", chromedp.Navigate(base+"dead-letters?order=by-domain&limit=500"),
		chromedp.WaitVisible(chromedp.CSS(`input.all`)), chromedp.Click(chromedp.CSS(`input.all`)))
	if n := count("#sel tbody input:checked"); n != 500 {
		t.Fatalf("%d selected, want 500", n)
	}
	do("redrive them", chromedp.Click(chromedp.CSS(`#sel button[value=redrive]`)), chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	if got := text(".notice"); got != "redrive: 500 of 500 done" {
		t.Errorf("after the bulk redrive: %q", got)
	}
	waitFor(t, "the 500 processed", func() bool {
		for i := range 500 {
			if !s.processed(fmt.Sprintf("bulk-%03d/%d", i%50, 100+i)) {
				return false
			}
		}
		return true
	})

	// A POST without the console's token is refused, and changes nothing.
	do("open the domains", chromedp.Navigate(base+"domains"), chromedp.WaitVisible(chromedp.CSS(`h1`)))
	status, err := chromedp.Run(bctx, chromedp.Evaluate[int](
		`fetch("action", {method: "POST", body: new URLSearchParams({op: "pause", item: "tenant-1", back: "domains"}), redirect: "manual"}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Errorf("a POST without the token: %d (%v), want 403", status, err)
	}
	if info, err := b.Inspect(ctx, "tenant-1"); err != nil || info.Paused {
		t.Errorf("tenant-1 after the refused pause: %+v, %v", info, err)
	}

	// Markup and bytes that are not UTF-8 show as text: domains so named,
	// paused, each with a dead letter and an offset queued.
	for _, d := range []string{"<script>alert(1)</script>", "bad\xff\xfename"} {
		if err := b.Pause(ctx, d); err != nil {
			t.Fatal(err)
		}
		for off := int64(1); off <= 2; off++ {
			if _, err := b.Enqueue(ctx, d, off, []byte("<img src=x onerror=alert(2)>")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.Kill(ctx, d, 1, "<script>alert(3)</script>"); err != nil {
			t.Fatal(err)
		}
	}
	do("the paused domains", chromedp.Navigate(base+"domains?state=paused"), chromedp.WaitVisible(chromedp.CSS(`td.domain a`)))
	cells, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("td.domain")].map(e => e.textContent.trim())`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"<script>alert(1)</script>": true, "0x626164fffe6e616d65": true}
	for _, c := range cells {
		delete(want, c)
	}
	if len(want) != 0 {
		t.Errorf("the paused domains show as %q", cells)
	}
	if n := count("script"); n != 1 { // the console's own
		t.Errorf("the page holds %d script elements, want 1", n)
	}
	do("open the domain that is not UTF-8", chromedp.Click(chromedp.Search(`//td[@class="domain"]/a[contains(., "0x626164")]`)),
		chromedp.WaitVisible(chromedp.CSS(`td.payload`)))
	if title, payload := text("h1.domain-title .domain"), text("td.payload"); title != "0x626164fffe6e616d65" || payload != "<img src=x onerror=alert(2)>" {
		t.Errorf("the domain's page shows %q, payload %q", title, payload)
	}
	if got := text(`//dt[text()="Queued"]/following-sibling::dd[1]`); got != "1" {
		t.Errorf("the domain that is not UTF-8 shows %q queued, want 1: its link did not round-trip", got)
	}
	if n := count("script"); n != 1 {
		t.Errorf("the domain's page holds %d script elements, want 1", n)
	}
}
