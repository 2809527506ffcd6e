package collect

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
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
	errTooSlow  = errors.New("upload body too slow")
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
	rec, err := s.ingest(w, r)
	var rj *rejection
	switch {
	case errors.As(err, &rj):
		s.m.rejects.WithLabelValues(rj.reason).Inc()
		s.m.uploads.WithLabelValues("rejected").Inc()
		if rj.code == http.StatusTooManyRequests || rj.code == http.StatusServiceUnavailable {
			s.retryAfter(w)
		}
		dropBody(w)
		writeJSON(w, rj.code, rj.body)
	case err != nil:
		s.m.uploads.WithLabelValues("error").Inc()
		// The reason names no file or server detail: those go to the log.
		// The store (index or raw) failing is an outage, answered 503
		// with Retry-After so probes back off; the upload itself was
		// judged valid before.
		code, reason := http.StatusServiceUnavailable, "the collector's store is unavailable (see its log); retry later"
		if store.IsFull(err) {
			code, reason = http.StatusInsufficientStorage, "the collector's storage is full; retry later"
		} else {
			s.retryAfter(w)
		}
		s.log.Error("upload not stored", "run_id", r.PathValue("run_id"), "err", err)
		dropBody(w)
		writeJSON(w, code, apiError{Error: "not stored", Reason: reason})
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

// dropBody closes the connection after an answer that may not have read
// the whole body. net/http reads up to 256 kB of what is left first (so
// the client, still sending, gets the answer rather than a reset), but at
// the client's pace: refusedGrace bounds it.
func dropBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refusedGrace))
}

// refusedGrace is how long the rest of a refused body may take.
const refusedGrace = 2 * time.Second

// ingest streams one upload through decompression, the size limit, the
// hash and the spool while validating it, then makes it durable and
// indexes it. Only a nil error may be answered 2xx.
func (s *Server) ingest(w http.ResponseWriter, r *http.Request) (Receipt, error) {
	id := r.PathValue("run_id")
	tok, code := s.authenticate(r)
	if code != 0 {
		if code == http.StatusServiceUnavailable {
			return Receipt{}, reject(code, "unavailable", apiError{Reason: "the store is unavailable to check the token; retry later"})
		}
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
	lim := s.cfg.Limits
	// The probe's own bound first, so a probe past it takes no slot of
	// the fleet's.
	if !s.enterProbe(tok.Name) {
		return Receipt{}, reject(http.StatusTooManyRequests, "probe_overloaded", apiError{Reason: fmt.Sprintf("this probe has %d uploads in flight already; retry later", lim.MaxPerProbe)})
	}
	defer s.leaveProbe(tok.Name)
	select {
	case s.sem <- struct{}{}:
		s.m.inFlight.Inc()
		defer func() { s.m.inFlight.Dec(); <-s.sem }()
	default:
		return Receipt{}, reject(http.StatusTooManyRequests, "overloaded", apiError{Reason: "too many uploads at once; retry later"})
	}
	if r.ContentLength > lim.MaxBytes {
		return Receipt{}, reject(http.StatusRequestEntityTooLarge, "too_large", apiError{Reason: fmt.Sprintf("over the %d-byte limit", lim.MaxBytes)})
	}
	if strings.EqualFold(strings.TrimSpace(r.Header.Get("Content-Encoding")), "zstd") {
		// A zstd decoder holds its window (up to zstdMaxWindow) and
		// buffers, ~18 MB: their number is bounded, the rest wait.
		t := time.NewTimer(zstdWait)
		select {
		case s.zstd <- struct{}{}:
			t.Stop()
			defer func() { <-s.zstd }()
		case <-t.C:
			return Receipt{}, reject(http.StatusTooManyRequests, "overloaded", apiError{Reason: "too many zstd uploads being decoded; retry later"})
		case <-r.Context().Done():
			t.Stop()
			return Receipt{}, r.Context().Err()
		}
	}
	paced := &paceReader{r: r.Body, rc: http.NewResponseController(w), quota: lim.MinRate * int64(lim.RateWindow/time.Millisecond) / 1000,
		window: lim.RateWindow, end: time.Now().Add(lim.MaxUploadTime)}
	body, err := decoder(r.Header.Get("Content-Encoding"), &limitReader{r: paced, n: lim.MaxBytes}, lim.MaxBytes)
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
	nul := &nulScan{}
	in := io.TeeReader(&limitReader{r: body, n: lim.MaxBytes}, storageWriter{io.MultiWriter(h, sp, n, nul)})
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
	if err := checkUpload(sp, n.n, p, nul); err != nil {
		return Receipt{}, err
	}
	sha := hex.EncodeToString(h.Sum(nil))
	now := s.cfg.Now().UTC()
	rep := store.Report{Probe: tok.Name, Seen: now, Backlog: headerInt(r, HeaderBacklog), Dropped: headerInt(r, HeaderDropped)}
	// A retry of a stored run is not looked up first (two queries an
	// upload): its object goes in under the same content-addressed key
	// (kept, never overwritten) and the index answers it as a duplicate.
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
		s.backlog.queue(got.RunID)
		select {
		case s.derive <- got:
		default:
			s.backlog.unqueue(got.RunID)
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
	var de *decodeError
	switch {
	case errors.As(err, &se):
		return err
	case errors.Is(err, errTooSlow):
		return reject(http.StatusRequestTimeout, "too_slow", apiError{Reason: fmt.Sprintf("the body arrived slower than %d bytes/s over %s, or took longer than %s", lim.MinRate, lim.RateWindow, lim.MaxUploadTime)})
	case errors.Is(err, errTooLarge), errors.As(err, &mbe), errors.Is(err, bufio.ErrTooLong):
		return reject(http.StatusRequestEntityTooLarge, "too_large", apiError{Reason: fmt.Sprintf("over the size limit (%d bytes; a JSON document %d; a line %d)", lim.MaxBytes, lim.MaxDocument, report.MaxLineSize)})
	case errors.As(err, &inv):
		return reject(http.StatusBadRequest, "invalid", apiError{Reason: inv.Reason, Line: inv.Line, Pointer: inv.Pointer})
	case errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &de):
		return reject(http.StatusBadRequest, "truncated", apiError{Reason: "the body ended before its declared length"})
	case errors.As(err, &de) && de.limit:
		return reject(http.StatusRequestEntityTooLarge, "too_large", apiError{Reason: fmt.Sprintf("the collector decodes zstd with windows up to %d bytes and at most %d bytes in all: %v (compress without --long, at a level up to 19)", zstdMaxWindow, lim.MaxBytes, de.err)})
	case errors.As(err, &de):
		return reject(http.StatusBadRequest, "encoding", apiError{Reason: "body does not decompress: " + de.err.Error()})
	}
	return err
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

// parse reads all of in (which tees into the spool). A JSON Lines run is
// validated line by line as it streams; a JSON document is read back from
// the spool once whole and validated there, a record at a time.
func (s *Server) parse(in io.Reader) (parsed, error) {
	br := getReader(in)
	defer putReader(br)
	peek, err := br.Peek(sniffSize)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return parsed{}, err
	}
	if len(peek) < sniffSize && len(bytes.TrimSpace(peek)) == 0 {
		return parsed{}, &report.InvalidError{Reason: "empty body"}
	}
	if startsWithHeader(peek) {
		sc := bufio.NewScanner(br)
		sc.Buffer(make([]byte, 0, 64<<10), report.MaxLineSize)
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return parsed{}, err
			}
		}
		var id ident
		if err := json.Unmarshal(sc.Bytes(), &id); err != nil {
			return parsed{}, &report.InvalidError{Line: 1, Reason: "not JSON: " + err.Error()}
		}
		return s.parseStream(sc, br, id)
	}
	// A document: drain into the spool; ingest validates it from there.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return parsed{}, err
	}
	return parsed{document: true}, nil
}

// sniffSize is how much of a body parse looks at to tell a stream from a
// document, without holding a long first line.
const sniffSize = 64 << 10

// readers are parse's buffers, reused: a new 64 kB buffer for every
// upload was a tenth of the collector's CPU (allocating and clearing it).
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, sniffSize) }}

func getReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}

// startsWithHeader says whether the first JSON value in b is an object
// whose top-level "type" is "header" (a stream's first line; mptester
// writes "type" first). A document has no such key.
func startsWithHeader(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return false
		}
		if k == "type" {
			v, err := dec.Token()
			return err == nil && v == report.TypeHeader
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
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

// parseDocument validates a JSON document from the (flushed) spool, one
// record at a time: memory does not grow with the document.
func (s *Server) parseDocument(f io.ReaderAt, size int64) (parsed, error) {
	if size > s.cfg.Limits.MaxDocument {
		return parsed{}, errTooLarge
	}
	p := parsed{contentType: "application/json"}
	br := getReader(io.NewSectionReader(f, 0, size))
	defer putReader(br)
	sum, err := report.CheckDocumentStream(br)
	switch {
	case errors.Is(err, report.ErrNewerMajor):
		p.sum = report.RunSummary{SchemaVersion: sum.SchemaVersion, RunID: sum.RunID, ProbeID: sum.ProbeID, Command: sum.Command}
		return p, nil
	case err != nil:
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

// zstdWait bounds the wait for a zstd decoder (429 after it).
const zstdWait = 30 * time.Second

// zstdMaxWindow is the largest zstd window decoded: what `zstd -19` and
// the uploader use, and the memory one zstd upload may take.
const zstdMaxWindow = 8 << 20

// decoder undoes Content-Encoding: identity, gzip or zstd, decoding at
// most maxBytes. An error of the decoding itself (not of reading r) is a
// *decodeError.
func decoder(enc string, r io.Reader, maxBytes int64) (io.ReadCloser, error) {
	src := &sourceReader{r: r}
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "", "identity":
		return io.NopCloser(r), nil
	case "gzip", "x-gzip":
		return &decodeReader{src: src, rc: &lazyGzip{r: src}}, nil
	case "zstd":
		// Bounded window and output: a hostile frame cannot make the
		// server allocate more than zstdMaxWindow to decode it.
		d, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecoderMaxMemory(uint64(max(maxBytes, 1))), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		return &decodeReader{src: src, rc: d.IOReadCloser()}, nil
	}
	return nil, fmt.Errorf("%w %q (want gzip, zstd or none)", errEncoding, enc)
}

// decodeError is a body that does not decode; limit: not within the
// collector's limits (413), else corrupt (400).
type decodeError struct {
	err   error
	limit bool
}

func (e *decodeError) Error() string { return "decode body: " + e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// sourceReader remembers the error reading the compressed body, so the
// decoder's own errors can be told from it.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

type decodeReader struct {
	src *sourceReader
	rc  io.ReadCloser
}

func (d *decodeReader) Read(p []byte) (int, error) {
	n, err := d.rc.Read(p)
	if err == nil || err == io.EOF {
		return n, err
	}
	if d.src.err != nil {
		return n, d.src.err // reading the body failed: its error, not the decoder's
	}
	return n, &decodeError{err: err, limit: errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded)}
}

func (d *decodeReader) Close() error { return d.rc.Close() }

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

// paceReader cuts a body that delivers less than quota bytes within
// window, counted from when the previous quota was met, or that is not
// done by end. It sets the connection's read deadline, so a silent client
// is cut as surely as a trickling one.
type paceReader struct {
	r      io.Reader
	rc     *http.ResponseController
	quota  int64
	window time.Duration
	end    time.Time
	need   int64
	armed  bool
}

func (p *paceReader) Read(b []byte) (int, error) {
	if !p.armed || p.need <= 0 {
		until := time.Now().Add(p.window)
		if until.After(p.end) {
			until = p.end
		}
		if err := p.rc.SetReadDeadline(until); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return 0, err
		}
		p.need, p.armed = p.quota, true
	}
	n, err := p.r.Read(b)
	p.need -= int64(n)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = errTooSlow
	}
	return n, err
}

// enterProbe takes one of probe's upload slots, if it has one left.
func (s *Server) enterProbe(probe string) bool {
	s.probesMu.Lock()
	defer s.probesMu.Unlock()
	if s.probes[probe] >= s.cfg.Limits.MaxPerProbe {
		return false
	}
	s.probes[probe]++
	return true
}

func (s *Server) leaveProbe(probe string) {
	s.probesMu.Lock()
	defer s.probesMu.Unlock()
	if s.probes[probe]--; s.probes[probe] <= 0 {
		delete(s.probes, probe)
	}
}
