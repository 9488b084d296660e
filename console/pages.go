package console

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/worklease/worklease"
)

// defaultLimit is how many rows a page lists unless its limit says.
const defaultLimit = 50

// maxFill is how many pages of a backend a page of the console reads at
// most to fill itself: a backend may return short pages while it looks
// past items a filter leaves out.
const maxFill = 20

// pageQuery reads a page's limit and cursor.
func pageQuery(r *http.Request) (limit int, after string, err error) {
	q := r.URL.Query()
	limit = defaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > worklease.MaxPageLimit {
			return 0, "", badRequest("limit %q: want a number from 1 to %d", s, worklease.MaxPageLimit)
		}
		limit = n
	}
	return limit, q.Get("after"), nil
}

// domainOf reads the domain a request names in d.
func domainOf(r *http.Request) (string, error) {
	d := r.URL.Query().Get("d")
	if d == "" || len(d) > worklease.MaxDomainLen {
		return "", badRequest("domain: want 1 to %d bytes in the d parameter, got %d", worklease.MaxDomainLen, len(d))
	}
	return d, nil
}

// overviewData is what the overview shows.
type overviewData struct {
	Stats       worklease.Stats
	Totals      worklease.Totals
	Leases      []worklease.LeaseInfo
	DeadLetters []worklease.DeadLetter
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var d overviewData
	var err error
	if d.Stats, err = h.b.Stats(ctx); err != nil {
		return err
	}
	if d.Totals, err = h.b.Totals(ctx); err != nil {
		return err
	}
	leases, err := h.b.ListLeases(ctx, worklease.LeaseQuery{Limit: 8})
	if err != nil {
		return err
	}
	d.Leases = leases.Leases
	dead, err := h.b.ListDeadLetters(ctx, worklease.DeadLetterQuery{Order: worklease.DeadLettersNewestFirst, Limit: 8})
	if err != nil {
		return err
	}
	d.DeadLetters = dead.DeadLetters
	return h.render(w, r, "overview.html", "Overview", d)
}

// statsData is the overview's counts, as /api/stats serves them.
type statsData struct {
	At     time.Time        `json:"at"`
	Stats  worklease.Stats  `json:"stats"`
	Totals worklease.Totals `json:"totals"`
}

func (h *Handler) stats(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	d := statsData{At: time.Now()}
	var err error
	if d.Stats, err = h.b.Stats(ctx); err != nil {
		return err
	}
	if d.Totals, err = h.b.Totals(ctx); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	return json.NewEncoder(w).Encode(d)
}

// domainsData is what the domains page shows.
type domainsData struct {
	State   string
	States  []worklease.DomainState
	Prefix  string
	Limit   int
	Domains []worklease.DomainSummary
	Next    string
}

func (h *Handler) domains(w http.ResponseWriter, r *http.Request) error {
	limit, after, err := pageQuery(r)
	if err != nil {
		return err
	}
	state, err := worklease.ParseDomainState(r.URL.Query().Get("state"))
	if err != nil {
		return badRequest("state: %v", err)
	}
	d := domainsData{State: state.String(), States: worklease.DomainStates(), Prefix: r.URL.Query().Get("prefix"), Limit: limit}
	if len(d.Prefix) > worklease.MaxDomainLen {
		return badRequest("prefix: longer than any domain (%d bytes)", worklease.MaxDomainLen)
	}
	q := worklease.DomainQuery{Prefix: d.Prefix, State: state, After: after}
	d.Next, err = fill(r.Context(), limit, func(ctx context.Context, n int, after string) (int, string, error) {
		if after != "" {
			q.After = after
		}
		q.Limit = n
		p, err := h.b.ListDomains(ctx, q)
		d.Domains = append(d.Domains, p.Domains...)
		return len(p.Domains), p.Next, err
	})
	if err != nil {
		return err
	}
	return h.render(w, r, "domains.html", "Domains", d)
}

// fill reads pages of a backend's listing through list until it has
// limit items, the listing ends, or it read maxFill pages, and returns
// the cursor of what follows.
func fill(ctx context.Context, limit int, list func(ctx context.Context, n int, after string) (int, string, error)) (string, error) {
	got, after := 0, ""
	for range maxFill {
		n, next, err := list(ctx, limit-got, after)
		if err != nil {
			return "", err
		}
		got += n
		if next == "" || got >= limit {
			return next, nil
		}
		after = next
	}
	return after, nil
}

// domainData is what a domain's page shows.
type domainData struct {
	Domain      string
	Info        worklease.DomainInfo
	Backlog     []int64 // the first of it
	Limit       int
	DeadLetters []worklease.DeadLetter
	Next        string
}

// backlogShown is how much of a backlog a domain's page lists.
const backlogShown = 20

func (h *Handler) domain(w http.ResponseWriter, r *http.Request) error {
	domain, err := domainOf(r)
	if err != nil {
		return err
	}
	limit, after, err := pageQuery(r)
	if err != nil {
		return err
	}
	info, err := h.b.Inspect(r.Context(), domain)
	if err != nil {
		return err
	}
	p, err := h.b.ListDeadLetters(r.Context(), worklease.DeadLetterQuery{Domain: domain, Payloads: true, After: after, Limit: limit})
	if err != nil {
		return err
	}
	if isZero(info) && len(p.DeadLetters) == 0 && after == "" {
		return &statusError{http.StatusNotFound, errors.New("no such domain: the backend holds nothing of it (it was never seen, or was forgotten)")}
	}
	d := domainData{Domain: domain, Info: info, Limit: limit, DeadLetters: p.DeadLetters, Next: p.Next}
	d.Backlog = info.Backlog[:min(len(info.Backlog), backlogShown)]
	return h.render(w, r, "domain.html", "Domain", d)
}

// isZero reports whether info is that of a domain the backend holds
// nothing of.
func isZero(info worklease.DomainInfo) bool {
	return !info.Leased && !info.Paused && len(info.Backlog) == 0 && info.Processed == 0 && info.Failed == 0
}

// leasesData is what the leases page shows.
type leasesData struct {
	Limit  int
	Leases []worklease.LeaseInfo
	Next   string
}

func (h *Handler) leases(w http.ResponseWriter, r *http.Request) error {
	limit, after, err := pageQuery(r)
	if err != nil {
		return err
	}
	d := leasesData{Limit: limit}
	d.Next, err = fill(r.Context(), limit, func(ctx context.Context, n int, next string) (int, string, error) {
		if next != "" {
			after = next
		}
		p, err := h.b.ListLeases(ctx, worklease.LeaseQuery{After: after, Limit: n})
		d.Leases = append(d.Leases, p.Leases...)
		return len(p.Leases), p.Next, err
	})
	if err != nil {
		return err
	}
	return h.render(w, r, "leases.html", "Leases", d)
}

// deadLettersData is what the dead letters page shows.
type deadLettersData struct {
	Order       string
	Limit       int
	DeadLetters []worklease.DeadLetter
	Next        string
}

func (h *Handler) deadLetters(w http.ResponseWriter, r *http.Request) error {
	limit, after, err := pageQuery(r)
	if err != nil {
		return err
	}
	q := worklease.DeadLetterQuery{After: after, Limit: limit, Payloads: true}
	switch o := r.URL.Query().Get("order"); o {
	case "", "newest-first":
		q.Order = worklease.DeadLettersNewestFirst
	case "by-domain":
		q.Order = worklease.DeadLettersByDomain
	default:
		return badRequest("order %q: want newest-first or by-domain", o)
	}
	p, err := h.b.ListDeadLetters(r.Context(), q)
	if err != nil {
		return err
	}
	d := deadLettersData{Order: q.Order.String(), Limit: limit, DeadLetters: p.DeadLetters, Next: p.Next}
	return h.render(w, r, "deadletters.html", "Dead letters", d)
}

// static serves the embedded style sheet and script.
func (h *Handler) static(w http.ResponseWriter, r *http.Request) error {
	name := path.Base(r.URL.Path)
	b, err := fs.ReadFile(assets, "assets/"+name)
	if err != nil || path.Ext(name) == ".html" {
		return &statusError{http.StatusNotFound, errors.New("no such file")}
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	w.Header().Set("Cache-Control", "max-age=3600")
	_, _ = w.Write(b)
	return nil
}
