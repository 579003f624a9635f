package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// heartbeatWait is how long Heartbeat waits for another writer's lock: a
// write lock held that long means the store is not taking writes, and a
// probe must answer sooner than busyTimeout.
const heartbeatWait = time.Second

// Heartbeat proves that the database takes writes: it rewrites the one row
// of the heartbeat table and commits. The readiness probe calls it. A full
// disk, an I/O error, or a write lock held elsewhere for longer than a
// second fail it with errdefs.ErrUnavailable.
func (s *SQLite) Heartbeat(ctx context.Context) (err error) {
	defer func() {
		if err != nil && !errdefs.Is(err, errdefs.ErrUnavailable) {
			err = errdefs.New(errdefs.ErrUnavailable, "%w", err)
		}
	}()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return dbError(err, "write to the store")
	}
	defer conn.Close()
	// The driver does not cut a wait for the lock short when ctx ends, so
	// this connection waits less for the write, then goes back to normal.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", heartbeatWait.Milliseconds())); err != nil {
		return dbError(err, "write to the store")
	}
	defer func() {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds())); rerr != nil {
			// Never hand the pool a connection with the short wait.
			// Raw's error is the ErrBadConn asked for: it drops the connection.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	_, err = conn.ExecContext(ctx,
		`INSERT INTO heartbeat (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at`,
		time.Now().UnixNano())
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return errdefs.New(errdefs.ErrUnavailable, "write to the store: %w", err)
		}
		return dbError(err, "write to the store")
	}
	// The store takes writes again: remake a reserve a full disk spent.
	s.res.fill()
	return nil
}
