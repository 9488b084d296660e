package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/worklease/worklease"
)

// maxItems is how many items one action takes at most.
const maxItems = worklease.MaxPageLimit

// maxForm is the largest form an action reads: maxItems items of the
// longest domain, percent-encoded, and some.
const maxForm = maxItems*(3*worklease.MaxDomainLen+32) + 64<<10

// An op is an action of the console on one item.
type op struct {
	name    string // as the form says it, and the notice
	offsets bool   // its items name an offset of a domain, not a domain
	run     func(ctx context.Context, b worklease.Backend, domain string, offset int64, reason string) error
}

var ops = map[string]op{
	"redrive": {"redrive", true, func(ctx context.Context, b worklease.Backend, d string, off int64, _ string) error {
		_, err := b.Redrive(ctx, d, off)
		return err
	}},
	"kill": {"kill", true, func(ctx context.Context, b worklease.Backend, d string, off int64, reason string) error {
		_, err := b.Kill(ctx, d, off, reason)
		return err
	}},
	"pause": {"pause", false, func(ctx context.Context, b worklease.Backend, d string, _ int64, _ string) error {
		return b.Pause(ctx, d)
	}},
	"resume": {"resume", false, func(ctx context.Context, b worklease.Backend, d string, _ int64, _ string) error {
		_, err := b.Resume(ctx, d)
		return err
	}},
	"force-release": {"force-release", false, func(ctx context.Context, b worklease.Backend, d string, _ int64, _ string) error {
		_, err := b.ForceRelease(ctx, d)
		return err
	}},
}

// pages are the pages an action may go back to.
var pages = map[string]bool{"": true, "domains": true, "domain": true, "leases": true, "dead-letters": true}

// action runs a POST of a form: an op on each of its items, then sends the
// browser back to the page it came from, saying how it went.
func (h *Handler) action(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		h.fail(w, r, http.StatusMethodNotAllowed, fmt.Errorf("/action takes POST, not %s", r.Method))
		return
	}
	if h.cfg.readOnly {
		h.fail(w, r, http.StatusForbidden, errors.New("the console is read-only"))
		return
	}
	if err := h.cop.Check(r); err != nil {
		h.fail(w, r, http.StatusForbidden, fmt.Errorf("refused: %v", err))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("the form: %v", err))
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(h.token)) != 1 {
		h.fail(w, r, http.StatusForbidden, errors.New("refused: the form does not carry the console's token (reload the page it came from)"))
		return
	}
	back, err := backTo(r.PostForm.Get("back"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	o, ok := ops[r.PostForm.Get("op")]
	if !ok {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("no action %q: want redrive, kill, pause, resume or force-release", r.PostForm.Get("op")))
		return
	}
	items := r.PostForm["item"]
	switch {
	case len(items) == 0:
		h.fail(w, r, http.StatusBadRequest, errors.New("nothing selected"))
		return
	case len(items) > maxItems:
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("%d items selected; at most %d at once", len(items), maxItems))
		return
	}
	type target struct {
		domain string
		offset int64
	}
	targets := make([]target, 0, len(items))
	for _, it := range items {
		t, err := parseItem(it, o.offsets)
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("item %q: %v", it, err))
			return
		}
		targets = append(targets, target(t))
	}
	reason := r.PostForm.Get("reason")
	if reason == "" {
		reason = "killed from the console"
	}
	var done int
	var failed []string
	for _, t := range targets {
		if err := o.run(r.Context(), h.b, t.domain, t.offset, reason); err != nil {
			if statusOf(err) != http.StatusBadRequest && !isRefusal(err) {
				h.fail(w, r, statusOf(err), fmt.Errorf("%s stopped after %d of %d: %v", o.name, done, len(targets), err))
				return
			}
			failed = append(failed, err.Error())
			continue
		}
		done++
	}
	notice := fmt.Sprintf("%s: %d of %d done", o.name, done, len(targets))
	if len(failed) > 0 {
		notice += fmt.Sprintf("; %d refused: %s", len(failed), failed[0])
	}
	q := back.Query()
	q.Set("done", notice)
	back.RawQuery = q.Encode()
	w.Header().Set("Location", back.String()) // relative: the browser keeps the prefix
	w.WriteHeader(http.StatusSeeOther)
}

// isRefusal reports whether err is an answer of the contract that refuses
// one item, such as a Redrive of an offset that is not failed.
func isRefusal(err error) bool {
	for _, e := range []error{worklease.ErrNotDeadLettered, worklease.ErrNoLease, worklease.ErrAlreadyProcessed,
		worklease.ErrOffsetAhead, worklease.ErrDomainBusy} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// parseItem reads an item of a form: a domain percent-encoded, or with
// offsets, an offset, a slash and a domain percent-encoded.
func parseItem(item string, offsets bool) (struct {
	domain string
	offset int64
}, error) {
	var t struct {
		domain string
		offset int64
	}
	enc := item
	if offsets {
		num, rest, ok := strings.Cut(item, "/")
		if !ok {
			return t, errors.New("want offset/domain")
		}
		off, err := strconv.ParseInt(num, 10, 64)
		if err != nil || off < 0 {
			return t, fmt.Errorf("offset %q: want a number, 0 or more", num)
		}
		t.offset, enc = off, rest
	}
	d, err := url.QueryUnescape(enc)
	if err != nil {
		return t, fmt.Errorf("domain: %v", err)
	}
	if d == "" || len(d) > worklease.MaxDomainLen {
		return t, fmt.Errorf("domain: want 1 to %d bytes", worklease.MaxDomainLen)
	}
	t.domain = d
	return t, nil
}

// backTo returns the page a form goes back to: one of the console's
// pages, with its query, relative to the action.
func backTo(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !pages[u.Path] {
		return nil, fmt.Errorf("back %q: not a page of the console", s)
	}
	if u.Path == "" {
		u.Path = "./"
	}
	return u, nil
}
