package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations
var migrations embed.FS

// seqPK is an auto-numbered primary key in each dialect and blobType a
// column of bytes: the places the migrations differ.
var (
	seqPK = map[dialect]string{
		sqliteDialect:   "INTEGER PRIMARY KEY AUTOINCREMENT",
		postgresDialect: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
	}
	blobType = map[dialect]string{sqliteDialect: "BLOB", postgresDialect: "BYTEA"}
	// withoutRowid clusters a SQLite table by its primary key.
	withoutRowid = map[dialect]string{sqliteDialect: " WITHOUT ROWID", postgresDialect: ""}
)

// migrate applies the embedded migrations newer than the recorded version,
// each in its own transaction (a small goose-like migrator: files
// NNNN_name.sql, statements separated by ";" at the end of a line,
// {{seq_pk}}, {{blob}} and {{without_rowid}} replaced by the dialect's
// words).
func migrate(ctx context.Context, db *sql.DB, d dialect, lock func(*sql.Tx) error) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migrations table: %w", err)
	}
	dir := "migrations"
	files, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name() < files[j].Name() })
	for _, f := range files {
		num, _, _ := strings.Cut(f.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return fmt.Errorf("migration %s: name must start with a number", f.Name())
		}
		body, err := migrations.ReadFile(dir + "/" + f.Name())
		if err != nil {
			return err
		}
		sql := strings.NewReplacer("{{seq_pk}}", seqPK[d], "{{blob}}", blobType[d], "{{without_rowid}}", withoutRowid[d]).Replace(string(body))
		if err := applyOne(ctx, db, d, v, sql, lock); err != nil {
			return fmt.Errorf("migration %s: %w", f.Name(), err)
		}
	}
	return nil
}

func applyOne(ctx context.Context, db *sql.DB, d dialect, v int, body string, lock func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if lock != nil {
		if err := lock(tx); err != nil {
			return err
		}
	}
	q := "SELECT COUNT(*) FROM schema_migrations WHERE version = ?"
	if d == postgresDialect {
		q = "SELECT COUNT(*) FROM schema_migrations WHERE version = $1"
	}
	var n int
	if err := tx.QueryRowContext(ctx, q, v).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	for _, stmt := range strings.Split(body, ";\n") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	ins := "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"
	if d == postgresDialect {
		ins = "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)"
	}
	if _, err := tx.ExecContext(ctx, ins, v, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
