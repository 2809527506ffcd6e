-- Which runs have their derived rows (written in the same transaction as
-- the rows): the collector derives, at start and after its queue
-- overflowed, every parsed run that has none, so no run waits for a
-- manual `collect reindex`. Runs derived before this table existed are
-- the runs with rows.
CREATE TABLE derived_runs (
  run_id TEXT PRIMARY KEY REFERENCES runs (run_id),
  derived_at BIGINT NOT NULL
);
INSERT INTO derived_runs (run_id, derived_at)
  SELECT run_id, 0 FROM survey_cells UNION SELECT run_id, 0 FROM survey_probes UNION SELECT run_id, 0 FROM pattern_tests;
