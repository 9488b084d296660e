package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/console"
)

// The console mounted under a prefix, behind the application's own check
// of who may use it.
func ExampleNew() {
	m, _ := worklease.New()
	defer m.Close()
	c, err := console.New(m.Backend(), console.WithTitle("payments"))
	if err != nil {
		panic(err)
	}
	requireAdmin := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if user, pass, ok := r.BasicAuth(); !ok || user != "admin" || pass != "secret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="worklease"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/leases/", http.StripPrefix("/admin/leases", requireAdmin(c)))

	for _, auth := range []bool{false, true} {
		req := httptest.NewRequest(http.MethodGet, "/admin/leases/domains", nil)
		if auth {
			req.SetBasicAuth("admin", "secret")
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// 401
	// 200
}
