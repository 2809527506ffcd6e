package collect

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

type metrics struct {
	reg        *prometheus.Registry
	uploads    *prometheus.CounterVec // by result
	rejects    *prometheus.CounterVec // by reason
	duplicates prometheus.Counter
	bytes      prometheus.Counter
	latency    prometheus.Histogram
	lastSeen   *prometheus.GaugeVec
	inFlight   prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mptester_collect_uploads_total",
			Help: "Uploads answered, by result (stored, duplicate, unparsed, rejected, error)."}, []string{"result"}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mptester_collect_rejects_total",
			Help: "Uploads rejected, by reason."}, []string{"reason"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "mptester_collect_duplicates_total",
			Help: "Uploads of a run already stored with the same content."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "mptester_collect_bytes_total",
			Help: "Uncompressed bytes of stored uploads."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mptester_collect_ingest_seconds",
			Help: "Time from request to receipt of stored uploads.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		lastSeen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mptester_collect_probe_last_seen_seconds",
			Help: "Unix time of each probe's last upload."}, []string{"probe"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mptester_collect_uploads_in_flight",
			Help: "Uploads being received now (429 beyond --max-inflight)."}),
	}
	m.reg.MustRegister(m.uploads, m.rejects, m.duplicates, m.bytes, m.latency, m.lastSeen, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
