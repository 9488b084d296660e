// Package console is the operator's web console of worklease: an
// http.Handler over any worklease.Backend (the in-memory Manager through
// Manager.Backend, the PostgreSQL Manager of the pg module, or another)
// that shows what the backend holds and repairs it.
//
// # Pages
//
// The overview shows the domains, leases in flight, offsets queued, dead
// letters and paused domains (Backend.Totals), and the counts of
// transitions (Backend.Stats) with how many happened, and how fast, since
// the page opened; the soonest leases to expire and the latest dead
// letters. Domains lists the domains, filtered by state and by the start
// of their key; a domain's page shows its lease (the holder's token, its
// fence, the attempt, the expiry), its backlog's depth and head, and its
// dead letters with their causes and the start of their payloads. Leases
// lists the leases in flight, the soonest to expire first; Dead letters,
// the newest first or domain by domain. Every list pages with the
// backend's cursors.
//
// A domain and a cause may hold any bytes: the console shows one as text,
// escaped, when it is printable UTF-8, and otherwise as hex, marked so;
// never as markup. A domain goes into a link or a form percent-encoded,
// byte by byte, so that any bytes come back.
//
// # Actions
//
// Redrive (of dead letters), kill (of offsets in flight), pause, resume and
// force-release (of domains) each act on one item or on a selection of up
// to worklease.MaxPageLimit, and send the browser back to the page with a
// notice of how many were done. Every action is a POST of a form that
// carries the console's request token, a secret derived from the
// Handler's key (WithKey; random by default), which the console checks
// before anything else; it also refuses requests that the browser marks as
// coming from another site (http.CrossOriginProtection: Sec-Fetch-Site and
// Origin). ReadOnly removes the actions and refuses every POST.
//
// Bad input is a 4xx answer with a page saying what is wrong: an unknown
// domain (404), a bad cursor, limit or item (400), the wrong method (405),
// a POST without the token or from another site (403). An error of the
// backend is 503.
//
// # Mounting it
//
// The console has no authentication of its own: wrap it in the
// application's, and mount it under a path that ends in "/", with the
// prefix stripped (its links are relative, so any prefix works):
//
//	c, err := console.New(m.Backend())
//	if err != nil {
//		return err
//	}
//	mux.Handle("/admin/leases/", http.StripPrefix("/admin/leases", requireAdmin(c)))
//
// where requireAdmin is the application's check, for instance:
//
//	func requireAdmin(next http.Handler) http.Handler {
//		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//			user, pass, ok := r.BasicAuth()
//			if !ok || !validAdmin(user, pass) {
//				w.Header().Set("WWW-Authenticate", `Basic realm="worklease"`)
//				http.Error(w, "unauthorized", http.StatusUnauthorized)
//				return
//			}
//			next.ServeHTTP(w, r)
//		})
//	}
//
// The command in cmd/worklease runs the console on its own, against
// PostgreSQL or, read-only, a journal directory.
package console
