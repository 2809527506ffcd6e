package collect

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/report"
)

// Receipt is the answer to an accepted upload.
type Receipt = api.Receipt

// Headers a probe sends with an upload.
const (
	HeaderPath    = api.HeaderPath
	HeaderBacklog = api.HeaderBacklog
	HeaderDropped = api.HeaderDropped
)

var runIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

var (
	errTooLarge = errors.New("upload too large")
	errEncoding = errors.New("unsupported Content-Encoding")
)

// rejection is an upload answered 4xx; reason labels the metric.
type rejection struct {
	code   int
	reason string
	body   apiError
}

func (r *rejection) Error() string { return r.body.Error + ": " + r.body.Reason }

func reject(code int, reason string, body apiError) *rejection {
	if body.Error == "" {
		body.Error = http.StatusText(code)
	}
	return &rejection{code: code, reason: reason, body: body}
}

func (s *Server) handlePut(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec, err := s.ingest(r)
	var rj *rejection
	switch {
	case errors.As(err, &rj):
		s.m.rejects.WithLabelValues(rj.reason).Inc()
		s.m.uploads.WithLabelValues("rejected").Inc()
		if rj.code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(int(s.cfg.Limits.RetryAfter.Seconds()+0.999)))
		}
		if rj.code == http.StatusRequestEntityTooLarge || rj.code == http.StatusTooManyRequests {
			w.Header().Set("Connection", "close") // do not read the rest of a body we refuse
		}
		writeJSON(w, rj.code, rj.body)
	case err != nil:
		s.m.uploads.WithLabelValues("error").Inc()
		code := http.StatusInternalServerError
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			code = http.StatusInsufficientStorage
		}
		s.log.Error("upload not stored", "run_id", r.PathValue("run_id"), "err", err)
		writeJSON(w, code, apiError{Error: "not stored", Reason: err.Error()})
	default:
		code := http.StatusCreated
		switch {
		case rec.Duplicate:
			code = http.StatusOK
			s.m.duplicates.Inc()
			s.m.uploads.WithLabelValues("duplicate").Inc()
		case rec.Status == "unparsed":
			code = http.StatusAccepted
			s.m.uploads.WithLabelValues("unparsed").Inc()
		default:
			s.m.uploads.WithLabelValues("stored").Inc()
		}
		if !rec.Duplicate {
			s.m.bytes.Add(float64(rec.Bytes))
			s.m.latency.Observe(time.Since(start).Seconds())
		}
		writeJSON(w, code, rec)
	}
}

// ingest streams one upload through decompression, the size limit, the
// hash and the spool while validating it, then makes it durable and
// indexes it. Only a nil error may be answered 2xx.
func (s *Server) ingest(r *http.Request) (Receipt, error) {
	id := r.PathValue("run_id")
	tok, code := s.authenticate(r)
	if code != 0 {
		reason := map[int]string{401: "unauthorized"}[code]
		if reason == "" {
			return Receipt{}, fmt.Errorf("authenticate: status %d", code)
		}
		return Receipt{}, reject(code, reason, apiError{Reason: "a valid probe token is needed (Authorization: Bearer)"})
	}
	if tok.Role != store.RoleProbe {
		return Receipt{}, reject(http.StatusForbidden, "forbidden", apiError{Reason: "only probe tokens upload"})
	}
	if !runIDPattern.MatchString(id) {
		return Receipt{}, reject(http.StatusBadRequest, "invalid", apiError{Reason: "run_id in the URL is not a lowercase UUID"})
	}
	select {
	case s.sem <- struct{}{}:
		s.m.inFlight.Inc()
		defer func() { s.m.inFlight.Dec(); <-s.sem }()
	default:
		return Receipt{}, reject(http.StatusTooManyRequests, "overloaded", apiError{Reason: "too many uploads at once; retry later"})
	}
	lim := s.cfg.Limits
	if r.ContentLength > lim.MaxBytes {
		return Receipt{}, reject(http.StatusRequestEntityTooLarge, "too_large", apiError{Reason: fmt.Sprintf("over the %d-byte limit", lim.MaxBytes)})
	}
	body, err := decoder(r.Header.Get("Content-Encoding"), &limitReader{r: r.Body, n: lim.MaxBytes})
	if err != nil {
		return Receipt{}, reject(http.StatusUnsupportedMediaType, "encoding", apiError{Reason: err.Error()})
	}
	defer body.Close()

	sp := s.spool(r.Context(), id)
	committed := false
	defer func() {
		if !committed {
			sp.discard()
		}
	}()
	h := sha256.New()
	n := &countWriter{}
	in := io.TeeReader(&limitReader{r: body, n: lim.MaxBytes}, storageWriter{io.MultiWriter(h, sp, n)})
	p, err := s.parse(in)
	if err == nil {
		if err = sp.flush(); err != nil {
			return Receipt{}, &storageError{err}
		}
		if p.document {
			p, err = s.parseDocument(sp, n.n)
		}
	}
	if err != nil {
		return Receipt{}, classify(err, lim)
	}
	if p.sum.RunID != "" && p.sum.RunID != id {
		return Receipt{}, reject(http.StatusBadRequest, "invalid", apiError{Line: p.line, Pointer: "/run_id",
			Reason: fmt.Sprintf("run_id %s differs from the URL's %s", p.sum.RunID, id)})
	}
	if p.sum.ProbeID != "" && p.sum.ProbeID != tok.Name {
		return Receipt{}, reject(http.StatusForbidden, "forbidden", apiError{Line: p.line, Pointer: "/probe_id",
			Reason: fmt.Sprintf("probe_id %q is not this token's probe %q", p.sum.ProbeID, tok.Name)})
	}
	sha := hex.EncodeToString(h.Sum(nil))
	now := s.cfg.Now().UTC()
	rep := store.Report{Probe: tok.Name, Seen: now, Backlog: headerInt(r, HeaderBacklog), Dropped: headerInt(r, HeaderDropped)}
	// A retry of a stored run is answered from the index without writing.
	if old, err := s.cfg.Store.GetRun(r.Context(), id); err == nil {
		return s.answerExisting(old, sha, now)
	} else if !errors.Is(err, store.ErrNotFound) {
		return Receipt{}, err
	}
	rel, raw, err := sp.commit(sha)
	if err != nil {
		return Receipt{}, err
	}
	committed = true
	row := store.Run{RunID: id, ProbeID: tok.Name, Command: p.sum.Command, SchemaVersion: p.sum.SchemaVersion,
		Status: p.sum.Status, Parsed: p.parsed, StartedAt: p.sum.StartedAt, FinishedAt: p.sum.FinishedAt,
		Records: p.sum.Records, Bytes: n.n, SHA256: sha, RawPath: rel, Raw: raw, ContentType: p.contentType,
		UploadPath: r.Header.Get(HeaderPath), StoredAt: now}
	for _, pa := range p.sum.Paths {
		row.Paths = append(row.Paths, store.Path{Name: pa.Name, Kind: pa.Kind})
	}
	if !p.parsed {
		row.Status = "unparsed"
	}
	got, o, err := s.cfg.Store.PutRun(r.Context(), row, rep)
	if err != nil {
		return Receipt{}, err
	}
	if o != store.Stored {
		if o == store.Conflict && rel != store.RawInline {
			_ = s.raw.Remove(r.Context(), rel) // never acknowledged: the id holds other content
		}
		return s.answerExisting(got, sha, now)
	}
	s.m.lastSeen.WithLabelValues(tok.Name).Set(float64(now.Unix()))
	if p.parsed {
		select {
		case s.derive <- got:
		default:
			s.missed.Store(true) // the deriver catches up from the store
		}
	}
	st := "stored"
	if !p.parsed {
		st = "unparsed"
	}
	return Receipt{RunID: id, SHA256: sha, Bytes: n.n, StoredAt: now, ServerTime: now, Status: st, UploadPath: row.UploadPath}, nil
}

func (s *Server) answerExisting(old store.Run, sha string, now time.Time) (Receipt, error) {
	if old.SHA256 != sha {
		return Receipt{}, reject(http.StatusConflict, "conflict", apiError{Reason: fmt.Sprintf("run %s is stored with other content (sha256 %s)", old.RunID, old.SHA256)})
	}
	st := "stored"
	if !old.Parsed {
		st = "unparsed"
	}
	return Receipt{RunID: old.RunID, SHA256: old.SHA256, Bytes: old.Bytes, StoredAt: old.StoredAt, ServerTime: now,
		Duplicate: true, Status: st, UploadPath: old.UploadPath}, nil
}

func headerInt(r *http.Request, name string) int64 {
	n, _ := strconv.ParseInt(r.Header.Get(name), 10, 64)
	return max(n, 0)
}

// classify turns a parse error into its answer; storage errors pass.
func classify(err error, lim Limits) error {
	var inv *report.InvalidError
	var mbe *http.MaxBytesError
	var se *storageError
	switch {
	case errors.As(err, &se):
		return err
	case errors.Is(err, errTooLarge), errors.As(err, &mbe), errors.Is(err, bufio.ErrTooLong):
		return reject(http.StatusRequestEntityTooLarge, "too_large", apiError{Reason: fmt.Sprintf("over the size limit (%d bytes; a JSON document %d; a line %d)", lim.MaxBytes, lim.MaxDocument, report.MaxLineSize)})
	case errors.As(err, &inv):
		return reject(http.StatusBadRequest, "invalid", apiError{Reason: inv.Reason, Line: inv.Line, Pointer: inv.Pointer})
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.Is(err, zstd.ErrMagicMismatch),
		errors.Is(err, io.ErrUnexpectedEOF), isZstdError(err):
		return reject(http.StatusBadRequest, "encoding", apiError{Reason: "body does not decompress: " + err.Error()})
	}
	return err
}

func isZstdError(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "zstd")
}

// parsed is what parse learned from a body.
type parsed struct {
	sum         report.RunSummary
	parsed      bool   // false: a newer schema major, stored raw
	line        int    // line of the header (1) for streams, 0 for documents
	contentType string // application/x-ndjson or application/json
	document    bool   // a JSON document, still to be validated from the file
}

// ident is read leniently from any schema version.
type ident struct {
	Type          string `json:"type"`
	SchemaVersion string `json:"schema_version"`
	RunID         string `json:"run_id"`
	ProbeID       string `json:"probe_id"`
	Command       string `json:"command"`
}

func newerMajor(v string) bool {
	m, ok := report.MajorOf(v)
	return ok && m > report.SchemaMajor
}

// parse reads all of in (which tees into the tmp file f). A JSON Lines
// run is validated line by line as it streams; a JSON document is read
// back from f once whole (bounded by MaxDocument) and validated.
func (s *Server) parse(in io.Reader) (parsed, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), report.MaxLineSize)
	if !sc.Scan() {
		if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
			return parsed{}, err
		}
		if sc.Err() == nil {
			return parsed{}, &report.InvalidError{Reason: "empty body"}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return parsed{}, err
	}
	first := sc.Bytes()
	var id ident
	if sc.Err() == nil && json.Unmarshal(first, &id) == nil && id.Type == report.TypeHeader {
		return s.parseStream(sc, in, id)
	}
	// A document: drain what the scanner left into the file; ingest reads
	// it back once flushed.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return parsed{}, err
	}
	return parsed{document: true}, nil
}

func (s *Server) parseStream(sc *bufio.Scanner, in io.Reader, id ident) (parsed, error) {
	p := parsed{line: 1, contentType: "application/x-ndjson"}
	if newerMajor(id.SchemaVersion) {
		if _, err := io.Copy(io.Discard, in); err != nil {
			return parsed{}, err
		}
		p.sum = report.RunSummary{SchemaVersion: id.SchemaVersion, RunID: id.RunID, ProbeID: id.ProbeID, Command: id.Command}
		return p, nil
	}
	v, err := report.NewLineValidator()
	if err != nil {
		return parsed{}, err
	}
	if err := v.Line(sc.Bytes()); err != nil {
		if serr := sc.Err(); serr != nil {
			return parsed{}, serr
		}
		return parsed{}, err
	}
	for sc.Scan() {
		if err := v.Line(sc.Bytes()); err != nil {
			// A read or disk error ends the scan with a cut line: report
			// that error, not the cut line's.
			if serr := sc.Err(); serr != nil {
				return parsed{}, serr
			}
			return parsed{}, err
		}
	}
	if err := sc.Err(); err != nil {
		return parsed{}, err
	}
	if p.sum, err = v.Finish(); err != nil {
		return parsed{}, err
	}
	p.parsed = true
	return p, nil
}

// parseDocument validates a JSON document from the (flushed) spool.
func (s *Server) parseDocument(f io.ReaderAt, size int64) (parsed, error) {
	if size > s.cfg.Limits.MaxDocument {
		return parsed{}, errTooLarge
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return parsed{}, err
	}
	p := parsed{contentType: "application/json"}
	var id ident
	if err := json.Unmarshal(b, &id); err == nil && newerMajor(id.SchemaVersion) {
		p.sum = report.RunSummary{SchemaVersion: id.SchemaVersion, RunID: id.RunID, ProbeID: id.ProbeID, Command: id.Command}
		return p, nil
	}
	sum, err := report.CheckDocument(b)
	if err != nil {
		return parsed{}, err
	}
	p.sum, p.parsed = sum, true
	return p, nil
}

// limitReader fails with errTooLarge once more than n bytes are read.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n < 0 {
		return n, errTooLarge
	}
	return n, err
}

// storageWriter marks errors of the hash/tmp-file side of the tee, so a
// full disk is answered 5xx, never blamed on the upload.
type storageWriter struct{ w io.Writer }

type storageError struct{ err error }

func (e *storageError) Error() string { return "store upload: " + e.err.Error() }
func (e *storageError) Unwrap() error { return e.err }

func (s storageWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		err = &storageError{err}
	}
	return n, err
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// decoder undoes Content-Encoding: identity, gzip or zstd.
func decoder(enc string, r io.Reader) (io.ReadCloser, error) {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "", "identity":
		return io.NopCloser(r), nil
	case "gzip", "x-gzip":
		return &lazyGzip{r: r}, nil
	case "zstd":
		// Bounded window: a hostile frame cannot make the server allocate
		// more than 8 MB to decode it.
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(8<<20), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}
	return nil, fmt.Errorf("%w %q (want gzip, zstd or none)", errEncoding, enc)
}

// lazyGzip reads the gzip header on first Read, so a bad header is a
// decode error of the body (400), not of the request setup.
type lazyGzip struct {
	r  io.Reader
	z  *gzip.Reader
	zr error
}

func (g *lazyGzip) Read(p []byte) (int, error) {
	if g.z == nil && g.zr == nil {
		g.z, g.zr = gzip.NewReader(g.r)
	}
	if g.zr != nil {
		return 0, g.zr
	}
	return g.z.Read(p)
}

func (g *lazyGzip) Close() error {
	if g.z != nil {
		return g.z.Close()
	}
	return nil
}
