-- What the fleet's Prometheus figures need beyond the first derived
-- tables: a survey cell's RTT quantiles besides its median (the studies'
-- ECDFs), and a pattern test's goodput (bulk; each direction of iperf and
-- interactive). NULL for rows derived before this migration until
-- `collect reindex` derives them again.
ALTER TABLE survey_cells ADD COLUMN rtt_p10_ms DOUBLE PRECISION;
ALTER TABLE survey_cells ADD COLUMN rtt_p25_ms DOUBLE PRECISION;
ALTER TABLE survey_cells ADD COLUMN rtt_p75_ms DOUBLE PRECISION;
ALTER TABLE survey_cells ADD COLUMN rtt_p90_ms DOUBLE PRECISION;
ALTER TABLE pattern_tests ADD COLUMN goodput_bps DOUBLE PRECISION;
ALTER TABLE pattern_tests ADD COLUMN upload_goodput_bps DOUBLE PRECISION;
ALTER TABLE pattern_tests ADD COLUMN download_goodput_bps DOUBLE PRECISION;
