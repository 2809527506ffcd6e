-- Roll-ups for the fleet views (rollup.go): per bucket of width (a UTC
-- day or, for recent runs, hour; both in nanoseconds) starting at bucket,
-- probe, command, cell or path, transport and pattern, the counts and
-- the sketches (sketch.go's bytes) of the runs derived into it.
-- derived_runs.rolled_up says a run's rows are in; runs derived before
-- this table are rolled up by the collector's catch-up at its next start.
CREATE TABLE rollups (
  width BIGINT NOT NULL,
  bucket BIGINT NOT NULL,
  probe TEXT NOT NULL,
  command TEXT NOT NULL,
  cell TEXT NOT NULL,
  transport TEXT NOT NULL,
  pattern TEXT NOT NULL,
  runs BIGINT NOT NULL,
  tests BIGINT NOT NULL,
  ok BIGINT NOT NULL,
  invalid BIGINT NOT NULL,
  sketches {{blob}} NOT NULL,
  PRIMARY KEY (width, bucket, probe, command, cell, transport, pattern)
);
CREATE INDEX rollups_probe ON rollups(probe, width, bucket);
ALTER TABLE derived_runs ADD COLUMN rolled_up BOOLEAN NOT NULL DEFAULT FALSE;
