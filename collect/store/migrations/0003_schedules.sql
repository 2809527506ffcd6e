-- One revisioned fleet schedule per probe, or '*' for every probe without its own.
CREATE TABLE schedules (
  probe TEXT PRIMARY KEY,
  revision BIGINT NOT NULL,
  body TEXT NOT NULL,
  updated_at BIGINT NOT NULL
);
