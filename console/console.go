package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/worklease/worklease"
)

// An Option configures a Handler.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	readOnly bool
	key      []byte
	title    string
	refresh  time.Duration
}

// ReadOnly makes the console show and change nothing: it offers no
// action, and refuses every POST with 403 Forbidden.
func ReadOnly() Option { return optionFunc(func(c *config) { c.readOnly = true }) }

// WithKey sets the secret the console derives its request token from
// (see the package documentation): the same key gives the same token, so
// that a form a page of one replica of a service served is taken by
// another behind the same load balancer. It must be at least 16 bytes.
// By default each Handler makes a random one.
func WithKey(key []byte) Option { return optionFunc(func(c *config) { c.key = key }) }

// WithTitle sets the name the console's pages show, "worklease" by default.
func WithTitle(title string) Option { return optionFunc(func(c *config) { c.title = title }) }

// WithRefresh sets how often the overview reads the counts again, every 2
// seconds by default; it must be at least 100 ms.
func WithRefresh(d time.Duration) Option { return optionFunc(func(c *config) { c.refresh = d }) }

// A Handler serves the console for one backend. Use New; the zero Handler
// is not usable. It is safe for concurrent use.
type Handler struct {
	b     worklease.Backend
	cfg   config
	token string // the request token every form carries
	mux   *http.ServeMux
	pages *template.Template
	cop   *http.CrossOriginProtection
}

var _ http.Handler = (*Handler)(nil)

// New returns the console of b. It never closes b.
func New(b worklease.Backend, opts ...Option) (*Handler, error) {
	if b == nil {
		return nil, errors.New("console: New: nil backend")
	}
	cfg := config{title: "worklease", refresh: 2 * time.Second}
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case cfg.key == nil:
		cfg.key = make([]byte, 32)
		rand.Read(cfg.key) // never fails; see crypto/rand.Read
	case len(cfg.key) < 16:
		return nil, fmt.Errorf("console: WithKey: a key of %d bytes; want at least 16", len(cfg.key))
	}
	if cfg.refresh < 100*time.Millisecond {
		return nil, fmt.Errorf("console: WithRefresh(%v): want at least 100ms", cfg.refresh)
	}
	mac := hmac.New(sha256.New, cfg.key)
	mac.Write([]byte("worklease console request token"))
	h := &Handler{
		b:     b,
		cfg:   cfg,
		token: base64.RawURLEncoding.EncodeToString(mac.Sum(nil)),
		mux:   http.NewServeMux(),
		pages: parsePages(),
		cop:   http.NewCrossOriginProtection(),
	}
	h.routes()
	return h, nil
}

// routes registers the console's pages, all at one level, so that their
// links are relative and the console works under any prefix.
func (h *Handler) routes() {
	page := func(path string, f func(w http.ResponseWriter, r *http.Request) error) {
		h.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				h.fail(w, r, http.StatusMethodNotAllowed, fmt.Errorf("%s takes GET, not %s", r.URL.Path, r.Method))
				return
			}
			if err := f(w, r); err != nil {
				h.failErr(w, r, err)
			}
		})
	}
	page("/{$}", h.overview)
	page("/domains", h.domains)
	page("/domain", h.domain)
	page("/leases", h.leases)
	page("/dead-letters", h.deadLetters)
	page("/api/stats", h.stats)
	page("/static/", h.static)
	h.mux.HandleFunc("/action", h.action)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no page %s", r.URL.Path))
	})
}

// ServeHTTP serves the console's pages and actions, with paths relative
// to where it is mounted: strip the prefix (http.StripPrefix) and mount it
// at a path that ends in "/".
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	h.mux.ServeHTTP(w, r)
}

// A statusError is an error with the HTTP status it answers.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// badRequest returns an error that answers 400 with err.
func badRequest(format string, args ...any) error {
	return &statusError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

// statusOf returns the status of err: its own, 400 for an input the
// backend refused, 503 for any other error of the backend.
func statusOf(err error) int {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return se.status
	case errors.Is(err, worklease.ErrInvalidCursor), errors.Is(err, worklease.ErrInvalidLimit),
		errors.Is(err, worklease.ErrInvalidDomain), errors.Is(err, worklease.ErrInvalidOffset):
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, err error) {
	h.fail(w, r, statusOf(err), err)
}

// fail answers with status and an error page saying err.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_ = h.pages.ExecuteTemplate(w, "error.html", h.view(r, "Error", map[string]any{
		"Status": status, "StatusText": http.StatusText(status), "Message": err.Error(),
	}))
}
