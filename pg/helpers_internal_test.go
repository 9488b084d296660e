package pg

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// scratchSchema returns a pool on the server of WORKLEASE_PG_URL, closed
// when t ends, and the name of a schema of t's own that starts with prefix,
// dropped when t ends. Without a server it skips t, or fails it under
// CI=true, as the package's other tests do.
func scratchSchema(t *testing.T, prefix string) (context.Context, *pgxpool.Pool, string) {
	t.Helper()
	url := os.Getenv("WORKLEASE_PG_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("WORKLEASE_PG_URL is not set: run the tests with make test, which starts a PostgreSQL server")
		}
		t.Skip("no PostgreSQL server: WORKLEASE_PG_URL is not set (make test starts one and sets it)")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	name := fmt.Sprintf("%s_%x", prefix, newInstance())
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	return ctx, pool, name
}

// userPool returns a pool, closed when t ends, of a new role (dropped when
// t ends) that may use schema's tables, sequences and functions, as an
// application's role may, but owns nothing and may create nothing.
func userPool(t *testing.T, pool *pgxpool.Pool, schema string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	role := "user_" + schema
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT ALL ON ALL TABLES IN SCHEMA " + schema + " TO " + role,
		"GRANT ALL ON ALL SEQUENCES IN SCHEMA " + schema + " TO " + role,
		"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA " + schema + " TO " + role,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx, "DROP OWNED BY "+role+"; DROP ROLE "+role); err != nil {
			t.Error(err)
		}
	})
	cfg := pool.Config()
	cfg.ConnConfig.User = role
	user, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(user.Close)
	return user
}
