-- Small uploads kept whole in the database, committed with their index row
-- (runs.raw_path = 'inline'): one group commit makes many durable, where a
-- file each costs a create, a rename and two fsyncs. Insert-only, like the
-- raw files.
CREATE TABLE raw_inline (
  run_id TEXT PRIMARY KEY REFERENCES runs (run_id),
  body {{blob}} NOT NULL
);
