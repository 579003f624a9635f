package store

import (
	"errors"
	"fmt"
	"syscall"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/warrenhq/warren/internal/errdefs"
)

// dbError adds context to an error of a database call, as
// fmt.Errorf(format+": %w", args..., err) does, and classifies it: a full
// disk, an I/O error, a database locked for longer than busy_timeout or
// read-only are errdefs.ErrUnavailable, since the call may work once the
// host is fixed; any other error keeps no class (internal). SQLite rolls a
// statement that hits one of them back whole, so the file stays sound.
func dbError(err error, format string, args ...any) error {
	args = append(args, err)
	if transient(err) {
		return errdefs.New(errdefs.ErrUnavailable, format+": %w", args...)
	}
	return fmt.Errorf(format+": %w", args...)
}

// transient reports whether err is a database error the host causes
// rather than the data: see dbError.
func transient(err error) bool {
	switch sqliteCode(err) & 0xff { // the primary result code
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED,
		sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_INTERRUPT:
		return true
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS)
}

// fullDisk reports whether err is SQLite's or the kernel's "disk full".
// SQLITE_IOERR_SHMSIZE is how opening a WAL database reports that its
// shared-memory file could not grow.
func fullDisk(err error) bool {
	code := sqliteCode(err)
	return code&0xff == sqlite3.SQLITE_FULL || code == sqlite3.SQLITE_IOERR_SHMSIZE ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
