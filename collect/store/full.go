package store

import (
	"errors"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsFull says whether err is a full disk (or quota) under the store: the
// file system's ENOSPC/EDQUOT, SQLite's SQLITE_FULL, PostgreSQL's
// disk_full (53100). The collector answers it 507, not 500.
func IsFull(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) && coded.Code()&0xff == sqliteFull {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53100"
}

// sqliteFull is SQLITE_FULL, the primary result code of every "database
// or disk is full".
const sqliteFull = 13
