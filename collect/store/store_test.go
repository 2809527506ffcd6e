package store_test

import (
	"path/filepath"
	"testing"

	"github.com/mptester/mptester/collect/store/storetest"
	"github.com/mptester/mptester/internal/pgtest"
)

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "collect.db") })
}

// TestPostgres runs the same suite against a real server: a throwaway one
// started by the test (root, /usr/lib/postgresql) or MPTESTER_TEST_PG_DSN.
func TestPostgres(t *testing.T) {
	server := pgtest.Server(t)
	storetest.Run(t, func(t *testing.T) string { return pgtest.Database(t, server) })
}
