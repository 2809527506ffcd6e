package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Identity returns the collector's stored TLS certificate and key (PEM),
// storing the pair create makes when there is none. Replicas starting
// together agree: the first insert wins and every caller gets its pair.
func (s *sqlStore) Identity(ctx context.Context, create func() (certPEM, keyPEM []byte, err error)) ([]byte, []byte, error) {
	get := func() ([]byte, []byte, error) {
		var c, k string
		err := s.db.QueryRowContext(ctx, s.q(`SELECT cert_pem, key_pem FROM tls_identity WHERE name = ?`), "collect").Scan(&c, &k)
		return []byte(c), []byte(k), err
	}
	c, k, err := get()
	if err == nil {
		return c, k, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("tls identity: %w", err)
	}
	c, k, err = create()
	if err != nil {
		return nil, nil, err
	}
	if _, err := s.wdb.ExecContext(ctx, s.q(`INSERT INTO tls_identity (name, cert_pem, key_pem, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`), "collect", string(c), string(k), time.Now().UnixNano()); err != nil {
		return nil, nil, fmt.Errorf("tls identity: %w", err)
	}
	if c, k, err = get(); err != nil {
		return nil, nil, fmt.Errorf("tls identity: %w", err)
	}
	return c, k, nil
}
