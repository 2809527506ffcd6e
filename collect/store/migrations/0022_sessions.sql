-- Fleet-page sign-ins: the cookie holds a random session id, never the
-- admin token; the store keeps the id's hash, the admin token's hash
-- (a revoked admin's sessions end with it) and when the session expires.
CREATE TABLE sessions (
  hash TEXT PRIMARY KEY,
  token_hash TEXT NOT NULL,
  expires_at BIGINT NOT NULL
);
