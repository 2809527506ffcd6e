-- Typed tables derived from the raw uploads; `mptester collect reindex`
-- rebuilds them, so a parser fix never needs a re-upload.
CREATE TABLE survey_cells (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  probe_path TEXT NOT NULL,
  resolve_path TEXT NOT NULL,
  targets BIGINT NOT NULL,
  responsive BIGINT NOT NULL,
  unresponsive BIGINT NOT NULL,
  unresponsive_pct DOUBLE PRECISION NOT NULL,
  rtt_p50_ms DOUBLE PRECISION NOT NULL,
  rtt_mean_ms DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (run_id, probe_path, resolve_path)
);
CREATE TABLE survey_probes (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  seq BIGINT NOT NULL,
  probe_path TEXT NOT NULL,
  resolve_path TEXT NOT NULL,
  address TEXT NOT NULL,
  method TEXT NOT NULL,
  sent BIGINT NOT NULL,
  received BIGINT NOT NULL,
  responsive BOOLEAN NOT NULL,
  valid BOOLEAN NOT NULL,
  PRIMARY KEY (run_id, seq)
);
CREATE TABLE pattern_tests (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  idx BIGINT NOT NULL,
  pattern TEXT NOT NULL,
  transport TEXT NOT NULL,
  path TEXT NOT NULL,
  status TEXT NOT NULL,
  invalid BOOLEAN NOT NULL,
  PRIMARY KEY (run_id, idx)
);
CREATE TABLE pattern_path_bytes (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  idx BIGINT NOT NULL,
  path TEXT NOT NULL,
  bytes_sent BIGINT NOT NULL,
  bytes_received BIGINT NOT NULL,
  PRIMARY KEY (run_id, idx, path)
);
