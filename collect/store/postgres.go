package store

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

func openPostgres(ctx context.Context, dsn string) (Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// Collectors starting together take turns migrating.
	lock := func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7283401)`)
		return err
	}
	if err := migrate(ctx, db, postgresDialect, lock); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := newSQLStore(postgresDialect, db, db)
	if err := s.warm(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// Group commit here too: one WAL flush per batch, not per upload
	// (47.7 uploads/s with a transaction each, 200 clients; see
	// docs/benchmarks.md), several batches in flight.
	startBatcher(s, pgCommitters, s.commitPG)
	return s, nil
}
