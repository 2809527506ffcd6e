-- Index of raw uploads; times are Unix nanoseconds (UTC). One file for both
-- backends: {{seq_pk}} is the only dialect-specific part (migrate.go).
CREATE TABLE probes (
  name TEXT PRIMARY KEY,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT,
  last_seen BIGINT,
  runs BIGINT NOT NULL DEFAULT 0,
  last_status TEXT NOT NULL DEFAULT '',
  backlog BIGINT NOT NULL DEFAULT 0,
  dropped BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE tokens (
  hash TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT
);
CREATE INDEX tokens_name ON tokens(name);
CREATE TABLE runs (
  seq {{seq_pk}},
  run_id TEXT NOT NULL UNIQUE,
  probe_id TEXT NOT NULL,
  command TEXT NOT NULL,
  schema_version TEXT NOT NULL,
  status TEXT NOT NULL,
  parsed BOOLEAN NOT NULL,
  started_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  records BIGINT NOT NULL,
  bytes BIGINT NOT NULL,
  sha256 TEXT NOT NULL,
  raw_path TEXT NOT NULL,
  content_type TEXT NOT NULL,
  upload_path TEXT NOT NULL,
  stored_at BIGINT NOT NULL
);
CREATE INDEX runs_probe ON runs(probe_id, seq);
CREATE INDEX runs_started ON runs(started_at);
CREATE TABLE paths (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  PRIMARY KEY (run_id, name)
);
