package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worklease/worklease"
)

// The producers' calls that worklease.Backend gained with assigned offsets,
// schedules and cancellation. The PostgreSQL backend does not have them
// yet: each returns an error matching errors.ErrUnsupported and changes
// nothing.

// EnqueueAt is worklease.Manager.EnqueueAt; not supported yet.
func (m *Manager) EnqueueAt(ctx context.Context, domain string, offset int64, payload []byte, notBefore time.Time) (worklease.AcquireStatus, error) {
	return 0, unsupported("EnqueueAt")
}

// Append is worklease.Manager.Append; not supported yet.
func (m *Manager) Append(ctx context.Context, domain string, payload []byte, opts worklease.AppendOptions) (worklease.AppendResult, error) {
	return worklease.AppendResult{}, unsupported("Append")
}

// Cancel is worklease.Manager.Cancel; not supported yet.
func (m *Manager) Cancel(ctx context.Context, domain string, offset int64, inFlight bool) (worklease.Head, error) {
	return worklease.Head{}, unsupported("Cancel")
}

func unsupported(op string) error { return fmt.Errorf("pg: %s: %w", op, errors.ErrUnsupported) }
