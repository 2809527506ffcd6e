package store

import (
	"context"
	"database/sql"
	"sync"
)

// stmts is a querier that prepares each query once per database and
// reuses it (in a transaction through tx.StmtContext): the upload path runs
// the same few statements for every upload, and parsing them again was a
// sixth of the collector's CPU per pattern-run envelope on SQLite.
type stmts struct {
	db *sql.DB
	tx *sql.Tx // nil outside a transaction

	mu *sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmts(db *sql.DB) *stmts {
	return &stmts{db: db, mu: &sync.Mutex{}, m: map[string]*sql.Stmt{}}
}

// in returns the same cache for use inside tx (a transaction of db).
func (c *stmts) in(tx *sql.Tx) *stmts { d := *c; d.tx = tx; return &d }

func (c *stmts) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.m[query]
	c.mu.Unlock()
	if !ok && c.tx != nil {
		// Not warmed: prepare it for this transaction only (preparing on
		// the database could wait for the connection the transaction holds).
		return c.tx.PrepareContext(ctx, query)
	}
	if !ok {
		var err error
		if st, err = c.db.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if old, ok := c.m[query]; ok {
			st.Close()
			st = old
		} else {
			c.m[query] = st
		}
		c.mu.Unlock()
	}
	if c.tx != nil {
		return c.tx.StmtContext(ctx, st), nil
	}
	return st, nil
}

func (c *stmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, query)
	if err != nil {
		// A *sql.Row carrying err: let the database report it on Scan.
		if c.tx != nil {
			return c.tx.QueryRowContext(ctx, query, args...)
		}
		return c.db.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func (c *stmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (c *stmts) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (c *stmts) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	// Emptied in place: the field itself is read without mu by in (a
	// transaction begun as the store closes).
	clear(c.m)
}
