package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

func (s *sqlStore) PutSession(ctx context.Context, hash, tokenHash string, expires time.Time) error {
	// Expired sessions go as new ones come: the table stays small.
	if _, err := s.wdb.ExecContext(ctx, s.q(`DELETE FROM sessions WHERE expires_at <= ?`), nanos(time.Now())); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	_, err := s.wdb.ExecContext(ctx, s.q(`INSERT INTO sessions (hash, token_hash, expires_at) VALUES (?, ?, ?)`), hash, tokenHash, nanos(expires))
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	return nil
}

func (s *sqlStore) LookupSession(ctx context.Context, hash string, now time.Time) (Token, error) {
	var t Token
	err := s.rq.QueryRowContext(ctx, s.q(`SELECT t.hash, t.name, t.role FROM sessions x JOIN tokens t ON t.hash = x.token_hash
		WHERE x.hash = ? AND x.expires_at > ? AND t.revoked_at IS NULL`), hash, nanos(now)).Scan(&t.Hash, &t.Name, &t.Role)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, ErrNotFound
	}
	return t, err
}

func (s *sqlStore) DeleteSession(ctx context.Context, hash string) error {
	_, err := s.wdb.ExecContext(ctx, s.q(`DELETE FROM sessions WHERE hash = ?`), hash)
	return err
}

func (s *sqlStore) RevokeAdmin(ctx context.Context, name string, now time.Time) error {
	res, err := s.wdb.ExecContext(ctx, s.q(`UPDATE tokens SET revoked_at = ? WHERE name = ? AND role = ? AND revoked_at IS NULL`), nanos(now), name, RoleAdmin)
	if err != nil {
		return fmt.Errorf("revoke admin: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("admin %s: no live token: %w", name, ErrNotFound)
	}
	return nil
}
