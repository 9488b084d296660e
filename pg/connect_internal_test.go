package pg

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The connections a Manager opens of its own, to listen for WaitClaim and
// to vacuum, are made as its pool makes one: here the pool's settings name
// a role that does not exist, and only its BeforeConnect hook, which
// credentials that rotate often need, names the one that does. They are
// closed as the pool closes one, after its BeforeClose hook.
func TestOwnConnectionsTakeThePoolsHooks(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "hooks")
	cfg := pool.Config()
	user, app := cfg.ConnConfig.User, "hooks_"+name
	cfg.ConnConfig.User = "no_such_role"
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.User, cc.RuntimeParams["application_name"] = user, app
		return nil
	}
	// The pool's own connections are the first four made; the Manager's
	// are those made after them, known by their server process IDs.
	var after, closing atomic.Int32
	var ownMu sync.Mutex
	own := make(map[uint32]bool)
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		if after.Add(1) > 4 {
			ownMu.Lock()
			own[c.PgConn().PID()] = true
			ownMu.Unlock()
		}
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) {
		ownMu.Lock()
		defer ownMu.Unlock()
		if own[c.PgConn().PID()] {
			closing.Add(1)
		}
	}
	// The pool opens all of its connections first, and never more, so
	// that AfterConnect counts the Manager's own ones after them.
	cfg.MinConns, cfg.MaxConns = 4, 4
	p := newPool(t, cfg)
	waitFor(t, "the pool never opened its connections", func() bool { return after.Load() == 4 })
	m := open(t, p, name)
	m.vacuum.every = 1

	pooled := after.Load() // the pool's connections
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = m.WaitClaim(wctx, 1, time.Minute)
	}()
	waitFor(t, "WaitClaim never listened", func() bool {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query = $2",
			app, "LISTEN "+readyChannel).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	cancel()
	<-waited

	enqueueDomains(t, m, 1)
	claimAndSucceed(t, m, 1)
	waitFor(t, "no vacuum ran", func() bool { return vacuumCount(t, pool, name) == 2 })
	if n := after.Load() - pooled; n != 2 {
		t.Errorf("AfterConnect ran for %d connections of the Manager's own; want 2", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := closing.Load(); n != 2 {
		t.Errorf("BeforeClose ran for %d of the Manager's connections; want 2", n)
	}
}
