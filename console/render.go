package console

import (
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/worklease/worklease"
)

// The pages' templates and their static files.
//
//go:embed assets
var assets embed.FS

// parsePages parses the pages' templates.
func parsePages() *template.Template {
	return template.Must(template.New("").Funcs(template.FuncMap{
		"show":       show,
		"showCause":  showCause,
		"preview":    preview,
		"domainLink": domainLink,
		"domainItem": url.QueryEscape,
		"letterItem": letterItem,
		"when":       when,
		"until":      until,
		"fence":      func(t worklease.Token) uint64 { return t.Fence() },
		"states":     states,
		"add":        func(a, b int) int { return a + b },
		"nextLink":   nextLink,
		"selfLink":   selfLink,
	}).ParseFS(assets, "assets/*.html"))
}

// A shown is a byte string as a page shows it: as text if it is UTF-8 with
// nothing unprintable in it, else as hex, marked so.
type shown struct {
	Text string
	Hex  bool
	Cut  bool // the text is the start of a longer one
}

// show returns s as a page shows it. The template escapes the text; it is
// never markup.
func show(s string) shown {
	if printable(s) {
		return shown{Text: s}
	}
	return shown{Text: hex.EncodeToString([]byte(s)), Hex: true}
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// showCause returns a dead letter's cause as a page shows it; "" for none.
func showCause(err error) shown {
	if err == nil {
		return shown{}
	}
	return show(err.Error())
}

// previewLen is how much of a payload a page shows.
const previewLen = 96

// preview returns the start of a payload as a page shows it.
func preview(p []byte) shown {
	cut := len(p) > previewLen
	if cut {
		p = p[:previewLen]
		for len(p) > 0 && !utf8.Valid(p) && len(p) > previewLen-utf8.UTFMax {
			p = p[:len(p)-1] // a rune cut in two
		}
	}
	s := show(string(p))
	if s.Hex && len(s.Text) > previewLen {
		s.Text = s.Text[:previewLen]
	}
	s.Cut = cut || s.Hex && len(p)*2 > previewLen
	return s
}

// domainLink returns the link to domain's page. The domain is in the
// query, percent-encoded byte by byte, so that any bytes come back.
func domainLink(domain string) string {
	return "domain?" + url.Values{"d": {domain}}.Encode()
}

// letterItem returns the form value that names a dead letter or an
// offset of a domain: the offset, a slash, the domain percent-encoded.
func letterItem(domain string, offset int64) string {
	return fmt.Sprintf("%d/%s", offset, url.QueryEscape(domain))
}

// nextLink returns the link to the page of the listing page, with the
// query q, that starts after next.
func nextLink(page string, q url.Values, next string) string {
	c := url.Values{}
	for k, v := range q {
		if k != "after" && k != "done" {
			c[k] = v
		}
	}
	c.Set("after", next)
	return page + "?" + c.Encode()
}

// selfLink returns the link to page with the query q, less the notice of
// an action: where an action on the page goes back to.
func selfLink(page string, q url.Values) string {
	c := url.Values{}
	for k, v := range q {
		if k != "done" {
			c[k] = v
		}
	}
	if len(c) == 0 {
		return page
	}
	return page + "?" + c.Encode()
}

// when returns t for a page: UTC, to the second; "" for the zero time.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// until returns how long until t, or since it, for a page; "never" for the
// zero time.
func until(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Until(t).Round(time.Second)
	if d < 0 {
		return "expired " + (-d).String() + " ago"
	}
	return "in " + d.String()
}

// states returns the names of the states d is in.
func states(d worklease.DomainSummary) []string {
	var out []string
	for _, s := range worklease.DomainStates() {
		if d.State()&s != 0 {
			out = append(out, s.String())
		}
	}
	if len(out) == 0 {
		out = append(out, "idle")
	}
	return out
}

// A view is what every page's template gets.
type view struct {
	Title    string // the console's
	Page     string // the page's
	ReadOnly bool
	Token    string
	Refresh  int64 // milliseconds
	Notice   string
	Query    url.Values
	Data     any
}

// view returns the view of a page titled page, showing data.
func (h *Handler) view(r *http.Request, page string, data any) view {
	return view{
		Title: h.cfg.title, Page: page, ReadOnly: h.cfg.readOnly, Token: h.token,
		Refresh: h.cfg.refresh.Milliseconds(), Notice: r.URL.Query().Get("done"), Query: r.URL.Query(), Data: data,
	}
}

// render writes the page named name.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name, page string, data any) error {
	var b strings.Builder
	if err := h.pages.ExecuteTemplate(&b, name, h.view(r, page, data)); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, err := w.Write([]byte(b.String()))
	if err != nil {
		return nil // the client went away; nothing to tell it
	}
	return nil
}
