-- Runs an operator hid from every view and export (`collect run
-- quarantine`): the raw upload and the index row are kept (immutable),
-- the run is left out of ListRuns, the deriver and Export.
CREATE TABLE quarantine (
  run_id TEXT PRIMARY KEY REFERENCES runs (run_id),
  reason TEXT NOT NULL,
  quarantined_at BIGINT NOT NULL
);
