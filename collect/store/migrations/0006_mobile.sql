-- A mobile-mode run's summary, one row per handover transport (times in
-- nanoseconds since that transport's start; ratios are MPTCP's max delay
-- over this transport's, 0 for MPTCP itself or without delays).
CREATE TABLE mobile_summaries (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  idx BIGINT NOT NULL,
  transport TEXT NOT NULL,
  primary_path TEXT NOT NULL,
  backup_path TEXT NOT NULL,
  ended TEXT NOT NULL,
  status TEXT NOT NULL,
  handover_status TEXT NOT NULL,
  cause TEXT NOT NULL,
  first_backup_data_ns BIGINT NOT NULL,
  duration_sent_ns BIGINT NOT NULL,
  duration_received_ns BIGINT NOT NULL,
  upload_count BIGINT NOT NULL,
  upload_lost BIGINT NOT NULL,
  upload_p50_ns BIGINT NOT NULL,
  upload_p99_ns BIGINT NOT NULL,
  upload_max_ns BIGINT NOT NULL,
  download_count BIGINT NOT NULL,
  download_lost BIGINT NOT NULL,
  download_p50_ns BIGINT NOT NULL,
  download_p99_ns BIGINT NOT NULL,
  download_max_ns BIGINT NOT NULL,
  mptcp_ratio_upload DOUBLE PRECISION NOT NULL,
  mptcp_ratio_download DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (run_id, idx, transport)
);
