package pg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open waits for a database that is starting: one that refuses
// connections for now (it is not listening yet, or it answers that it is
// starting up, recovering or shutting down, as a restart does) is asked
// again after a pause, until it takes a connection or Open's context ends.
// Any other error of connecting (a role or database that does not exist,
// a wrong password) is returned at once.

// The pauses between two attempts to connect: from openFirstPause,
// doubling up to openMaxPause, each jittered by up to a fifth.
const (
	openFirstPause = 50 * time.Millisecond
	openMaxPause   = time.Second
)

// waitForDatabase returns once pool connects to the database, waiting as
// Open does, or the error Open returns: the error of connecting, and ctx's
// too if it ended while the database was starting.
func waitForDatabase(ctx context.Context, pool *pgxpool.Pool) error {
	pause := openFirstPause
	for {
		c, err := pool.Acquire(ctx)
		if err == nil {
			c.Release()
			return nil
		}
		if ctx.Err() != nil || !starting(err) {
			return openError(ctx, err)
		}
		timer := time.NewTimer(pause - time.Duration(rand.Int64N(int64(pause)/5+1)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return openError(ctx, err)
		case <-timer.C:
		}
		pause = min(2*pause, openMaxPause)
	}
}

// openError is Open's error when it could not connect: err, the last
// error of connecting, and ctx's error if it ended.
func openError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("pg: open: %w, waiting for the database: %w", cerr, err)
	}
	return fmt.Errorf("pg: open: %w", err)
}

// starting reports whether err, an error of connecting, says that the
// server refuses connections for now: it answered that it is starting up,
// shutting down or recovering (SQLSTATE 57P03, cannot_connect_now), or
// nothing listens at its address, or the connection was cut as it
// started, as when a server restarts.
func starting(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "57P03"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		// ENOENT: no socket file, for a server on a Unix socket.
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
	}
	return errors.Is(err, syscall.ECONNRESET)
}
