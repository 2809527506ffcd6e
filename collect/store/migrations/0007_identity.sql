-- The collector's TLS identity, shared by replicas on one database so every
-- replica presents the certificate probes pin. Created once (the first
-- replica to start inserts it; the others read it) and never replaced by
-- a start.
CREATE TABLE tls_identity (
  name TEXT PRIMARY KEY,
  cert_pem TEXT NOT NULL,
  key_pem TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
