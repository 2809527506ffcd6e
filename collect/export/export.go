// Package export writes a collect store's index and derived tables as
// Parquet files for analysts (DuckDB, pandas, Spark): one file per table
// and day of the runs' start (UTC), typed columns (timestamps in
// nanoseconds UTC, durations in nanoseconds, enums as strings).
//
// Layout under the output directory:
//
//	runs/2026-11-01.parquet
//	survey_cells/…  survey_probes/…  pattern_tests/…
//	pattern_path_bytes/…  mobile_summaries/…
//	probes/probes.parquet   (the enrolled probes: no day)
package export

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/mptester/mptester/collect/store"
)

// Tables are the exported tables, in the order they are written.
var Tables = []string{"runs", "survey_cells", "survey_probes", "pattern_tests", "pattern_path_bytes", "mobile_summaries", "probes"}

// Row types: one per table. Every derived row carries its run's id, probe,
// command and start, so a table is useful without a join.

type runRow struct {
	RunID         string `parquet:"run_id,dict"`
	ProbeID       string `parquet:"probe_id,dict"`
	Command       string `parquet:"command,dict"`
	SchemaVersion string `parquet:"schema_version,dict"`
	Status        string `parquet:"status,dict"`
	Parsed        bool   `parquet:"parsed"`
	StartedAt     int64  `parquet:"started_at,timestamp(nanosecond)"`
	FinishedAt    int64  `parquet:"finished_at,timestamp(nanosecond)"`
	DurationNs    int64  `parquet:"duration_ns"`
	Records       int64  `parquet:"records"`
	Bytes         int64  `parquet:"bytes"`
	SHA256        string `parquet:"sha256"`
	ContentType   string `parquet:"content_type,dict"`
	UploadPath    string `parquet:"upload_path,dict"`
	StoredAt      int64  `parquet:"stored_at,timestamp(nanosecond)"`
}

type cellRow struct {
	RunID           string  `parquet:"run_id,dict"`
	ProbeID         string  `parquet:"probe_id,dict"`
	StartedAt       int64   `parquet:"started_at,timestamp(nanosecond)"`
	ProbePath       string  `parquet:"probe_path,dict"`
	ResolvePath     string  `parquet:"resolve_path,dict"`
	Targets         int64   `parquet:"targets"`
	Responsive      int64   `parquet:"responsive"`
	Unresponsive    int64   `parquet:"unresponsive"`
	UnresponsivePct float64 `parquet:"unresponsive_pct"`
	RTTP50Ns        int64   `parquet:"rtt_p50_ns"`
	RTTMeanNs       int64   `parquet:"rtt_mean_ns"`
}

type probeRecordRow struct {
	RunID       string `parquet:"run_id,dict"`
	ProbeID     string `parquet:"probe_id,dict"`
	StartedAt   int64  `parquet:"started_at,timestamp(nanosecond)"`
	Seq         int64  `parquet:"seq,delta"`
	ProbePath   string `parquet:"probe_path,dict"`
	ResolvePath string `parquet:"resolve_path,dict"`
	Address     string `parquet:"address"`
	Method      string `parquet:"method,dict"`
	Sent        int64  `parquet:"sent"`
	Received    int64  `parquet:"received"`
	Responsive  bool   `parquet:"responsive"`
	Valid       bool   `parquet:"valid"`
}

type testRow struct {
	RunID     string `parquet:"run_id,dict"`
	ProbeID   string `parquet:"probe_id,dict"`
	StartedAt int64  `parquet:"started_at,timestamp(nanosecond)"`
	Index     int64  `parquet:"idx"`
	Pattern   string `parquet:"pattern,dict"`
	Transport string `parquet:"transport,dict"`
	Path      string `parquet:"path,dict"`
	Status    string `parquet:"status,dict"`
	Invalid   bool   `parquet:"invalid"`
}

type pathBytesRow struct {
	RunID         string `parquet:"run_id,dict"`
	ProbeID       string `parquet:"probe_id,dict"`
	StartedAt     int64  `parquet:"started_at,timestamp(nanosecond)"`
	Index         int64  `parquet:"idx"`
	Path          string `parquet:"path,dict"`
	BytesSent     int64  `parquet:"bytes_sent"`
	BytesReceived int64  `parquet:"bytes_received"`
}

type mobileRow struct {
	RunID              string  `parquet:"run_id,dict"`
	ProbeID            string  `parquet:"probe_id,dict"`
	StartedAt          int64   `parquet:"started_at,timestamp(nanosecond)"`
	Index              int64   `parquet:"idx"`
	Transport          string  `parquet:"transport,dict"`
	Primary            string  `parquet:"primary_path,dict"`
	Backup             string  `parquet:"backup_path,dict"`
	Ended              string  `parquet:"ended,dict"`
	Status             string  `parquet:"status,dict"`
	HandoverStatus     string  `parquet:"handover_status,dict"`
	Cause              string  `parquet:"cause,dict"`
	FirstBackupDataNs  int64   `parquet:"first_backup_data_ns"`
	DurationSentNs     int64   `parquet:"duration_sent_ns"`
	DurationReceivedNs int64   `parquet:"duration_received_ns"`
	UploadCount        int64   `parquet:"upload_count"`
	UploadLost         int64   `parquet:"upload_lost"`
	UploadP50Ns        int64   `parquet:"upload_p50_ns"`
	UploadP99Ns        int64   `parquet:"upload_p99_ns"`
	UploadMaxNs        int64   `parquet:"upload_max_ns"`
	DownloadCount      int64   `parquet:"download_count"`
	DownloadLost       int64   `parquet:"download_lost"`
	DownloadP50Ns      int64   `parquet:"download_p50_ns"`
	DownloadP99Ns      int64   `parquet:"download_p99_ns"`
	DownloadMaxNs      int64   `parquet:"download_max_ns"`
	MPTCPRatioUpload   float64 `parquet:"mptcp_ratio_upload"`
	MPTCPRatioDownload float64 `parquet:"mptcp_ratio_download"`
}

type probeRow struct {
	Name       string `parquet:"name"`
	CreatedAt  int64  `parquet:"created_at,timestamp(nanosecond)"`
	RevokedAt  *int64 `parquet:"revoked_at,optional,timestamp(nanosecond)"`
	LastSeen   *int64 `parquet:"last_seen,optional,timestamp(nanosecond)"`
	Runs       int64  `parquet:"runs"`
	LastStatus string `parquet:"last_status,dict"`
	Backlog    int64  `parquet:"backlog"`
	Dropped    int64  `parquet:"dropped"`
}

// File is one written file and its row count.
type File struct {
	Table string `json:"table"`
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
}

// Parquet writes the runs f selects and their derived rows to dir (created
// if need be). A file is written under a temporary name and renamed into
// place once complete, so a reader never sees half a file; files of
// earlier exports for the same table and day are replaced.
func Parquet(ctx context.Context, st store.Store, f store.ExportFilter, dir string) ([]File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	w := &writers{dir: dir, open: map[key]*file{}}
	err := st.Export(ctx, f, w)
	if err == nil {
		err = w.probes(ctx, st, f.Probe)
	}
	if err != nil {
		w.abort()
		return nil, err
	}
	return w.finish()
}

type key struct{ table, day string }

// file is one table-day's writer on its temporary file.
type file struct {
	key
	f    *os.File
	w    interface{ Close() error }
	rows int64
}

// writers keeps one open writer per table and day: rows arrive in run
// order, not day order, and a run's day is known only from its row.
type writers struct {
	dir  string
	open map[key]*file
}

// day is the UTC date a run's rows are filed under ("unknown" when the
// run has no start time).
func day(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.DateOnly)
}

func get[T any](w *writers, table, d string) (*parquet.GenericWriter[T], *file, error) {
	k := key{table, d}
	if f, ok := w.open[k]; ok {
		return f.w.(*parquet.GenericWriter[T]), f, nil
	}
	sub := filepath.Join(w.dir, table)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return nil, nil, err
	}
	tmp, err := os.CreateTemp(sub, "."+d+".parquet.tmp-*")
	if err != nil {
		return nil, nil, err
	}
	pw := parquet.NewGenericWriter[T](tmp, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(128<<10),
		parquet.CreatedBy("mptester", "", ""))
	f := &file{key: k, f: tmp, w: pw}
	w.open[k] = f
	return pw, f, nil
}

func write[T any](w *writers, table string, t time.Time, row T) error {
	pw, f, err := get[T](w, table, day(t))
	if err != nil {
		return err
	}
	if _, err := pw.Write([]T{row}); err != nil {
		return fmt.Errorf("%s: %w", table, err)
	}
	f.rows++
	return nil
}

func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// msToNs turns the store's float milliseconds into integer nanoseconds.
func msToNs(ms float64) int64 { return int64(math.Round(ms * 1e6)) }

func (w *writers) Run(r store.Run) error {
	d := int64(0)
	if !r.StartedAt.IsZero() && !r.FinishedAt.IsZero() {
		d = r.FinishedAt.Sub(r.StartedAt).Nanoseconds()
	}
	return write(w, "runs", r.StartedAt, runRow{RunID: r.RunID, ProbeID: r.ProbeID, Command: r.Command, SchemaVersion: r.SchemaVersion,
		Status: r.Status, Parsed: r.Parsed, StartedAt: ns(r.StartedAt), FinishedAt: ns(r.FinishedAt), DurationNs: d,
		Records: r.Records, Bytes: r.Bytes, SHA256: r.SHA256, ContentType: r.ContentType, UploadPath: r.UploadPath, StoredAt: ns(r.StoredAt)})
}

func (w *writers) Cell(ref store.RunRef, c store.SurveyCell) error {
	return write(w, "survey_cells", ref.StartedAt, cellRow{RunID: ref.RunID, ProbeID: ref.ProbeID, StartedAt: ns(ref.StartedAt),
		ProbePath: c.ProbePath, ResolvePath: c.ResolvePath, Targets: c.Targets, Responsive: c.Responsive, Unresponsive: c.Unresponsive,
		UnresponsivePct: c.UnresponsivePct, RTTP50Ns: msToNs(c.RTTP50ms), RTTMeanNs: msToNs(c.RTTMeanms)})
}

func (w *writers) Probe(ref store.RunRef, seq int64, p store.SurveyProbe) error {
	return write(w, "survey_probes", ref.StartedAt, probeRecordRow{RunID: ref.RunID, ProbeID: ref.ProbeID, StartedAt: ns(ref.StartedAt),
		Seq: seq, ProbePath: p.ProbePath, ResolvePath: p.ResolvePath, Address: p.Address, Method: p.Method, Sent: p.Sent,
		Received: p.Received, Responsive: p.Responsive, Valid: p.Valid})
}

func (w *writers) Test(ref store.RunRef, t store.PatternTest) error {
	return write(w, "pattern_tests", ref.StartedAt, testRow{RunID: ref.RunID, ProbeID: ref.ProbeID, StartedAt: ns(ref.StartedAt),
		Index: t.Index, Pattern: t.Pattern, Transport: t.Transport, Path: t.Path, Status: t.Status, Invalid: t.Invalid})
}

func (w *writers) PathBytes(ref store.RunRef, idx int64, b store.PathBytes) error {
	return write(w, "pattern_path_bytes", ref.StartedAt, pathBytesRow{RunID: ref.RunID, ProbeID: ref.ProbeID, StartedAt: ns(ref.StartedAt),
		Index: idx, Path: b.Path, BytesSent: b.Sent, BytesReceived: b.Received})
}

func (w *writers) Mobile(ref store.RunRef, m store.MobileSummary) error {
	return write(w, "mobile_summaries", ref.StartedAt, mobileRow{RunID: ref.RunID, ProbeID: ref.ProbeID, StartedAt: ns(ref.StartedAt),
		Index: m.Index, Transport: m.Transport, Primary: m.Primary, Backup: m.Backup, Ended: m.Ended, Status: m.Status,
		HandoverStatus: m.HandoverStatus, Cause: m.Cause, FirstBackupDataNs: m.FirstBackupData, DurationSentNs: m.DurationSent,
		DurationReceivedNs: m.DurationReceived, UploadCount: m.Upload.Count, UploadLost: m.Upload.Lost, UploadP50Ns: m.Upload.P50,
		UploadP99Ns: m.Upload.P99, UploadMaxNs: m.Upload.Max, DownloadCount: m.Download.Count, DownloadLost: m.Download.Lost,
		DownloadP50Ns: m.Download.P50, DownloadP99Ns: m.Download.P99, DownloadMaxNs: m.Download.Max,
		MPTCPRatioUpload: m.MPTCPRatioUpload, MPTCPRatioDownload: m.MPTCPRatioDownload})
}

// probes writes the enrolled probes (only probe when it is set).
func (w *writers) probes(ctx context.Context, st store.Store, probe string) error {
	ps, err := st.ListProbes(ctx)
	if err != nil {
		return err
	}
	pw, f, err := get[probeRow](w, "probes", "probes")
	if err != nil {
		return err
	}
	opt := func(t *time.Time) *int64 {
		if t == nil {
			return nil
		}
		n := t.UnixNano()
		return &n
	}
	for _, p := range ps {
		if probe != "" && p.Name != probe {
			continue
		}
		if _, err := pw.Write([]probeRow{{Name: p.Name, CreatedAt: ns(p.CreatedAt), RevokedAt: opt(p.RevokedAt), LastSeen: opt(p.LastSeen),
			Runs: p.Runs, LastStatus: p.LastStatus, Backlog: p.Backlog, Dropped: p.Dropped}}); err != nil {
			return fmt.Errorf("probes: %w", err)
		}
		f.rows++
	}
	return nil
}

// finish closes every file, makes it durable and renames it into place.
func (w *writers) finish() ([]File, error) {
	keys := make([]key, 0, len(w.open))
	for k := range w.open {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].table != keys[j].table {
			return keys[i].table < keys[j].table
		}
		return keys[i].day < keys[j].day
	})
	var out []File
	for _, k := range keys {
		f := w.open[k]
		err := errors.Join(f.w.Close(), f.f.Sync(), f.f.Close())
		if err != nil {
			w.abort()
			return nil, fmt.Errorf("%s: %w", f.f.Name(), err)
		}
	}
	for _, k := range keys {
		f := w.open[k]
		final := filepath.Join(w.dir, k.table, k.day+".parquet")
		if err := os.Rename(f.f.Name(), final); err != nil {
			w.abort()
			return nil, err
		}
		delete(w.open, k)
		out = append(out, File{Table: k.table, Path: final, Rows: f.rows})
	}
	return out, nil
}

// abort removes every temporary file.
func (w *writers) abort() {
	for _, f := range w.open {
		f.f.Close()
		os.Remove(f.f.Name())
	}
}
