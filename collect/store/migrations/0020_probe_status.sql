-- What each probe last reported about itself besides its uploads: its
-- owner's caps and the tasks of its schedule it refused or skipped (JSON).
CREATE TABLE probe_status (
  probe TEXT PRIMARY KEY,
  body TEXT NOT NULL,
  reported_at BIGINT NOT NULL
);
