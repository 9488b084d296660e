package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/console"
)

// newServer serves the console of a new Manager under /admin/, and
// returns the Manager.
func newServer(t *testing.T, opts ...console.Option) (*httptest.Server, *worklease.Manager) {
	t.Helper()
	m, err := worklease.New(worklease.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	c, err := console.New(m.Backend(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", c))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, m
}

// get returns the status and body of a GET of path.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	res, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var tokenRE = regexp.MustCompile(`name="token" value="([^"]+)"`)

// post submits an action's form, as a page of the console does, and
// returns the status and where it sends the browser.
func post(t *testing.T, srv *httptest.Server, form url.Values, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/admin/action", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return res.StatusCode, res.Header.Get("Location")
}

func tokenOf(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	_, body := get(t, srv, "/admin/dead-letters")
	m := tokenRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no token in the page")
	}
	return m[1]
}

func TestPages(t *testing.T) {
	srv, m := newServer(t)
	must(t, m.Pause("<script>alert(1)</script>"))
	_, err := m.Kill("bad\xff\xfe", 3, "cause\x00<b>")
	must(t, err)
	_, err = m.TryAcquire("tenant-1", 1)
	must(t, err)
	for _, c := range []struct {
		path   string
		status int
		has    []string
	}{
		{"/admin/", 200, []string{"In flight", "tenant-1"}},
		{"/admin/domains", 200, []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "0x626164fffe", "tenant-1"}},
		{"/admin/domains?state=dead-lettered", 200, []string{"0x626164fffe"}},
		{"/admin/domains?state=paused&prefix=%3Cscript", 200, []string{"&lt;script&gt;"}},
		{"/admin/domain?d=bad%FF%FE", 200, []string{"0x636175736500", "0x626164fffe"}},
		{"/admin/leases", 200, []string{"tenant-1"}},
		{"/admin/dead-letters?order=by-domain", 200, []string{"0x626164fffe"}},
		{"/admin/api/stats", 200, []string{`"Leased":1`}},
		{"/admin/static/style.css", 200, []string{"--accent"}},
		{"/admin/domain?d=unknown", 404, []string{"no such domain"}},
		{"/admin/domain", 400, []string{"domain"}},
		{"/admin/domain?d=" + strings.Repeat("x", worklease.MaxDomainLen+1), 400, []string{"domain"}},
		{"/admin/domains?after=garbage", 400, []string{"cursor"}},
		{"/admin/leases?after=garbage", 400, []string{"cursor"}},
		{"/admin/dead-letters?after=garbage", 400, []string{"cursor"}},
		{"/admin/domain?d=tenant-1&after=garbage", 400, []string{"cursor"}},
		{"/admin/domains?limit=100000000000", 400, []string{"limit"}},
		{"/admin/domains?limit=-1", 400, []string{"limit"}},
		{"/admin/domains?state=sleepy", 400, []string{"state"}},
		{"/admin/dead-letters?order=oldest", 400, []string{"order"}},
		{"/admin/nothing", 404, []string{"no page"}},
		{"/admin/static/overview.html", 404, nil},
		{"/admin/action", 405, []string{"POST"}},
	} {
		status, body := get(t, srv, c.path)
		if status != c.status {
			t.Errorf("GET %s: %d, want %d: %s", c.path, status, c.status, body)
		}
		for _, s := range c.has {
			if !strings.Contains(body, s) {
				t.Errorf("GET %s: no %q in the page", c.path, s)
			}
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("GET %s: the domain's markup is in the page", c.path)
		}
	}
	res, err := srv.Client().Post(srv.URL+"/admin/domains", "text/plain", nil)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /domains: %d", res.StatusCode)
	}
}

func TestActions(t *testing.T) {
	srv, m := newServer(t)
	for _, d := range []string{"a", "b\xff", "c d/e"} {
		_, err := m.Kill(d, 1, "poison")
		must(t, err)
	}
	token := tokenOf(t, srv)
	form := url.Values{"token": {token}, "op": {"redrive"}, "back": {"dead-letters?order=by-domain"},
		"item": {"1/a", "1/b%FF", "1/" + url.QueryEscape("c d/e"), "2/a"}}
	status, loc := post(t, srv, form, nil)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "dead-letters?") || !strings.Contains(loc, "3+of+4+done") {
		t.Fatalf("redrive: %d to %q", status, loc)
	}
	for _, d := range []string{"a", "b\xff", "c d/e"} {
		info, err := m.Inspect(d)
		must(t, err)
		if len(info.Backlog) != 1 || info.Failed != 0 {
			t.Errorf("%q after the redrive: %+v", d, info)
		}
	}
	form = url.Values{"token": {token}, "op": {"pause"}, "back": {""}, "item": {"a"}}
	if status, loc := post(t, srv, form, nil); status != http.StatusSeeOther || !strings.HasPrefix(loc, "./?") {
		t.Fatalf("pause: %d to %q", status, loc)
	}
	info, _ := m.Inspect("a")
	if !info.Paused {
		t.Error("a is not paused")
	}
	for _, c := range []struct {
		name   string
		form   url.Values
		header map[string]string
		status int
	}{
		{"no token", url.Values{"op": {"resume"}, "item": {"a"}}, nil, 403},
		{"wrong token", url.Values{"token": {"x" + token}, "op": {"resume"}, "item": {"a"}}, nil, 403},
		{"another site", url.Values{"token": {token}, "op": {"resume"}, "item": {"a"}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"another origin", url.Values{"token": {token}, "op": {"resume"}, "item": {"a"}}, map[string]string{"Origin": "https://evil.example"}, 403},
		{"unknown op", url.Values{"token": {token}, "op": {"explode"}, "item": {"a"}}, nil, 400},
		{"nothing selected", url.Values{"token": {token}, "op": {"resume"}}, nil, 400},
		{"bad item", url.Values{"token": {token}, "op": {"redrive"}, "item": {"x/a"}}, nil, 400},
		{"bad encoding", url.Values{"token": {token}, "op": {"pause"}, "item": {"%zz"}}, nil, 400},
		{"back elsewhere", url.Values{"token": {token}, "op": {"resume"}, "item": {"a"}, "back": {"https://evil.example/"}}, nil, 400},
	} {
		if status, _ := post(t, srv, c.form, c.header); status != c.status {
			t.Errorf("%s: %d, want %d", c.name, status, c.status)
		}
	}
	info, _ = m.Inspect("a")
	if !info.Paused {
		t.Error("a refused resume resumed it")
	}
}

func TestReadOnly(t *testing.T) {
	srv, m := newServer(t, console.ReadOnly())
	_, err := m.Kill("a", 1, "poison")
	must(t, err)
	_, body := get(t, srv, "/admin/dead-letters")
	if strings.Contains(body, `value="redrive"`) {
		t.Error("a read-only console offers a redrive")
	}
	form := url.Values{"token": tokenRE.FindStringSubmatch(body)[1:2], "op": {"redrive"}, "item": {"1/a"}}
	if status, _ := post(t, srv, form, nil); status != http.StatusForbidden {
		t.Errorf("a read-only console took a POST: %d", status)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
