package pg

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrSchemaTooNew is returned by Open when the schema was installed by a
// newer version of this package than the running one: it refuses to run
// against state it may not understand.
var ErrSchemaTooNew = errors.New("pg: schema is newer than this package")

// The migrations, in order: NNN_name.sql, each with {{schema}} where the
// schema's quoted name goes. A released migration never changes. The
// event kinds their SQL writes as numbers are worklease.EventKind's, whose
// values are frozen; sqlKinds, in sql_kinds_test.go, names each of them.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// A migration is one numbered step of the schema.
type migration struct {
	version int
	sql     string
}

// migrations returns the embedded migrations in order.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("pg: migration %s is not named NNN_name.sql", base)
		}
		text, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{v, string(text)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	return out, nil
}

// migrate brings schema up to date in one transaction, and returns the
// database's instance. Processes that start together take turns: each holds
// a lock for the schema's name while it migrates, and finds the work done
// by the one before it. A schema already up to date, before or after
// waiting for that lock, is only read, so that a role that may use it but
// not create or change it can open it.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) (instance uint64, err error) {
	all, err := migrations()
	if err != nil {
		return 0, err
	}
	if instance, done, err := upToDate(ctx, pool, schema, all); done {
		return instance, err
	}
	return apply(ctx, pool, schema, all)
}

// A querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// upToDate reports whether schema is installed at the last version of all,
// done, with its instance, or at a newer version, done with
// ErrSchemaTooNew, or whether it could not tell, done with the error. It
// reads and locks nothing else.
func upToDate(ctx context.Context, q querier, schema string, all []migration) (instance uint64, done bool, err error) {
	var found bool
	err = q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL",
		schema+".migrations", schema+".meta").Scan(&found)
	if err != nil {
		return 0, true, dbError("migrate", err)
	}
	if !found {
		return 0, false, nil
	}
	var version int
	var inst int64
	err = q.QueryRow(ctx, "SELECT coalesce((SELECT max(version) FROM "+schema+".migrations), 0), "+
		"coalesce((SELECT instance FROM "+schema+".meta), 0)").Scan(&version, &inst)
	switch latest := all[len(all)-1].version; {
	case err != nil:
		return 0, true, dbError("migrate", err)
	case version > latest:
		return 0, true, fmt.Errorf("%w: schema %s is at version %d, this package knows %d", ErrSchemaTooNew, schema, version, latest)
	case version == latest && inst != 0:
		return uint64(inst), true, nil
	}
	return 0, false, nil
}

// apply brings schema up to the last of all, the migrations in order, as
// migrate does.
func apply(ctx context.Context, pool *pgxpool.Pool, schema string, all []migration) (instance uint64, err error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return 0, dbError("migrate", err)
	}
	defer func() {
		// A connection to a server that takes no writes is closed, so
		// that the pool connects again, to the server that does (see
		// ErrReadOnly).
		if errors.Is(err, ErrReadOnly) {
			_ = c.Conn().Close(ctx)
		}
		c.Release()
	}()
	tx, err := c.Begin(ctx)
	if err != nil {
		return 0, dbError("migrate", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit, a no-op
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "worklease.pg.migrate:"+schema); err != nil {
		return 0, dbError("migrate", err)
	}
	// The process before may have done the work while this one waited.
	if instance, done, err := upToDate(ctx, tx, schema, all); done {
		return instance, err
	}
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema+";"+
		"CREATE TABLE IF NOT EXISTS "+schema+".migrations (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return 0, dbError("migrate", err)
	}
	var current int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+schema+".migrations").Scan(&current); err != nil {
		return 0, dbError("migrate", err)
	}
	for _, mg := range all {
		if mg.version <= current {
			continue
		}
		if _, err := tx.Exec(ctx, strings.ReplaceAll(mg.sql, "{{schema}}", schema)); err != nil {
			return 0, dbError(fmt.Sprintf("migration %d", mg.version), err)
		}
		if mg.version == 1 {
			if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".meta (instance) VALUES ($1)", int64(newInstance())); err != nil {
				return 0, dbError("migrate", err)
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".migrations (version) VALUES ($1)", mg.version); err != nil {
			return 0, dbError("migrate", err)
		}
	}
	var inst int64
	if err := tx.QueryRow(ctx, "SELECT instance FROM "+schema+".meta").Scan(&inst); err != nil {
		return 0, dbError("migrate", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbError("migrate", err)
	}
	return uint64(inst), nil
}

// newInstance returns a random instance for a new schema: non-zero, and
// below 2^63 so that the database's bigint holds it.
func newInstance() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:]) // never fails; see crypto/rand.Read
		if id := binary.LittleEndian.Uint64(b[:]) >> 1; id != 0 {
			return id
		}
	}
}
