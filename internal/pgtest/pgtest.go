// Package pgtest starts a throwaway PostgreSQL server for tests: initdb into
// a temporary directory and pg_ctl start on a unix socket only, as a
// non-root user (initdb refuses root). MPTESTER_TEST_PG_DSN names an
// existing server instead (each call then gets a fresh database on it).
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// EnvDSN names an existing server to test against.
const EnvDSN = "MPTESTER_TEST_PG_DSN"

// DSN returns the DSN of a new, empty database on a new server.
func DSN(t testing.TB) string { return Database(t, Server(t)) }

// Server returns the DSN of a server that goes away with the test: a
// throwaway one, or MPTESTER_TEST_PG_DSN's. It skips only when PostgreSQL
// cannot be had and this is neither root nor CI.
func Server(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	bin := binDir()
	if bin == "" || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL tests need root and the postgresql package (or %s)", EnvDSN)
		}
		t.Skipf("PostgreSQL tests need root and /usr/lib/postgresql/*/bin (or %s)", EnvDSN)
	}
	return startServer(t, bin)
}

// Ctl is a throwaway server a test can stop and start again (fault
// tests); its data outlives a stop.
type Ctl struct {
	DSN   string // the server's default database
	start func(t testing.TB)
	stop  func(t testing.TB, mode string)
}

// Controlled starts a throwaway server the test may stop; it skips (fails
// under CI) as Server does, and skips with MPTESTER_TEST_PG_DSN, a server
// the test must not stop.
func Controlled(t testing.TB) *Ctl {
	t.Helper()
	if os.Getenv(EnvDSN) != "" {
		t.Skipf("stops the server: needs a throwaway one, not %s", EnvDSN)
	}
	bin := binDir()
	if bin == "" || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL tests need root and the postgresql package")
		}
		t.Skipf("PostgreSQL tests need root and /usr/lib/postgresql/*/bin")
	}
	return newServer(t, bin)
}

// Stop shuts the server down as an operator would (pg_ctl -m fast: open
// sessions are ended).
func (c *Ctl) Stop(t testing.TB) { t.Helper(); c.stop(t, "fast") }

// Start starts a stopped server again.
func (c *Ctl) Start(t testing.TB) { t.Helper(); c.start(t) }

// binDir is the newest /usr/lib/postgresql/N/bin with initdb.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Strings(dirs)
	if len(dirs) == 0 {
		return ""
	}
	return filepath.Dir(dirs[len(dirs)-1])
}

// Database creates a new database on server and returns its DSN; it is
// dropped with the test.
func Database(t testing.TB, dsn string) string {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "mptester_test_" + hex.EncodeToString(b)
	if _, err := db.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database on %s: %v", EnvDSN, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			db.Close()
		}
	})
	return withDatabase(dsn, name)
}

// withDatabase replaces the database name of a postgres:// URL.
func withDatabase(dsn, name string) string {
	rest, query, _ := strings.Cut(dsn, "?")
	scheme, hostPart, _ := strings.Cut(rest, "://")
	host, _, _ := strings.Cut(hostPart, "/")
	out := scheme + "://" + host + "/" + name
	if query != "" {
		out += "?" + query
	}
	return out
}
