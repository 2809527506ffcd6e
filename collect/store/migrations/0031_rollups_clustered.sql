-- The roll-ups clustered by their key on SQLite (WITHOUT ROWID): a fleet
-- view reads a window's rows in key order, which on a rowid table cost a
-- look-up in the table for every row of the key's index.
-- {{without_rowid}} is empty on PostgreSQL.
CREATE TABLE rollups_new (
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
){{without_rowid}};
INSERT INTO rollups_new SELECT width, bucket, probe, command, cell, transport, pattern, runs, tests, ok, invalid, sketches FROM rollups;
DROP TABLE rollups;
ALTER TABLE rollups_new RENAME TO rollups;
CREATE INDEX rollups_probe ON rollups(probe, width, bucket);
