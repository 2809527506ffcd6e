package list

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultTrancoURL is where Tranco lists are downloaded from.
const DefaultTrancoURL = "https://tranco-list.eu"

// trancoListSize is the length of a standard Tranco list, and what is
// downloaded: the whole list is cached, whatever --top asks for.
const trancoListSize = 1_000_000

var trancoID = regexp.MustCompile(`^[A-Z0-9]{1,16}$`)

// ErrTrancoUnavailable wraps every failure to get a list from the Tranco
// service (unreachable, an HTTP error, a truncated or malformed download).
var ErrTrancoUnavailable = errors.New("the Tranco list is unavailable")

// TrancoFetcher downloads Tranco lists into a cache directory; a list id
// names an immutable list, so a cached file is never fetched again, and
// "latest" is asked for once a day (UTC).
type TrancoFetcher struct {
	BaseURL  string // DefaultTrancoURL when empty
	CacheDir string
	Client   *http.Client
	Now      func() time.Time // time.Now when nil
}

// TrancoList is a list in the cache.
type TrancoList struct {
	Path      string
	ID        string
	Date      string    // the day Tranco created the list (YYYY-MM-DD); empty if the service did not say
	Retrieved time.Time // when it was downloaded
	Cached    bool      // found in the cache: nothing was downloaded
}

// trancoMeta is what the cache keeps beside a list (tranco-ID.json).
type trancoMeta struct {
	ID        string    `json:"id"`
	Date      string    `json:"date,omitempty"`
	Retrieved time.Time `json:"retrieved"`
	URL       string    `json:"url"`
}

func (t TrancoFetcher) base() string {
	if t.BaseURL == "" {
		return DefaultTrancoURL
	}
	return strings.TrimSuffix(t.BaseURL, "/")
}

func (t TrancoFetcher) now() time.Time {
	if t.Now != nil {
		return t.Now().UTC()
	}
	return time.Now().UTC()
}

// Fetch returns the cached list id ("latest": today's list), downloading
// it first if needed. Every failure to reach the service or to get a whole
// Tranco list wraps ErrTrancoUnavailable and names the URL tried.
func (t TrancoFetcher) Fetch(ctx context.Context, id string) (TrancoList, error) {
	if t.CacheDir == "" {
		return TrancoList{}, fmt.Errorf("no cache directory for Tranco lists")
	}
	latest := ""
	if id == "latest" {
		latest = filepath.Join(t.CacheDir, "latest-"+t.now().Format(time.DateOnly))
		if b, err := os.ReadFile(latest); err == nil {
			if l, ok := t.cached(strings.TrimSpace(string(b))); ok {
				return l, nil
			}
		}
		b, err := t.get(ctx, "/top-1m-id", 64, nil)
		if err != nil {
			return TrancoList{}, err
		}
		id = strings.TrimSpace(string(b))
		if !trancoID.MatchString(id) {
			return TrancoList{}, fmt.Errorf("%w: %s/top-1m-id answered %q, not a list id", ErrTrancoUnavailable, t.base(), truncate(id))
		}
	}
	if !trancoID.MatchString(id) {
		return TrancoList{}, fmt.Errorf("invalid Tranco list id %q", truncate(id))
	}
	l, ok := t.cached(id)
	if !ok {
		var err error
		if l, err = t.download(ctx, id); err != nil {
			return TrancoList{}, err
		}
	}
	if latest != "" {
		// Best effort: without it, tomorrow's first run asks again anyway.
		_ = writeAtomic(t.CacheDir, latest, func(w io.Writer) error { _, err := io.WriteString(w, id+"\n"); return err })
	}
	return l, nil
}

// cached returns list id if the cache holds it whole: the CSV and its
// metadata are written (renamed) only after a complete, valid download.
func (t TrancoFetcher) cached(id string) (TrancoList, bool) {
	if !trancoID.MatchString(id) {
		return TrancoList{}, false
	}
	path := filepath.Join(t.CacheDir, "tranco-"+id+".csv")
	b, err := os.ReadFile(filepath.Join(t.CacheDir, "tranco-"+id+".json"))
	if err != nil {
		return TrancoList{}, false
	}
	var m trancoMeta
	if json.Unmarshal(b, &m) != nil || m.ID != id {
		return TrancoList{}, false
	}
	if _, err := os.Stat(path); err != nil {
		return TrancoList{}, false
	}
	return TrancoList{Path: path, ID: id, Date: m.Date, Retrieved: m.Retrieved, Cached: true}, true
}

func (t TrancoFetcher) download(ctx context.Context, id string) (TrancoList, error) {
	if err := os.MkdirAll(t.CacheDir, 0o755); err != nil {
		return TrancoList{}, fmt.Errorf("create cache directory: %w", err)
	}
	p := "/download/" + id + "/" + strconv.Itoa(trancoListSize)
	path := filepath.Join(t.CacheDir, "tranco-"+id+".csv")
	// Written to a temporary file and renamed only once the whole body
	// came and checked out as a Tranco list: a truncated download or an
	// error page is never trusted next time.
	err := writeAtomic(t.CacheDir, path, func(w io.Writer) error {
		_, err := t.get(ctx, p, 256<<20, &trancoCSV{w: w})
		return err
	})
	if err != nil {
		return TrancoList{}, err
	}
	m := trancoMeta{ID: id, Retrieved: t.now(), URL: t.base() + p}
	// The list's date comes from the service's metadata; a mirror that
	// serves only the CSV files leaves it unknown.
	if b, err := t.get(ctx, "/api/lists/id/"+id, 1<<16, nil); err == nil {
		var api struct {
			ID        string `json:"list_id"`
			CreatedOn string `json:"created_on"`
		}
		if json.Unmarshal(b, &api) == nil && api.ID == id && len(api.CreatedOn) >= 10 {
			if d, err := time.Parse(time.DateOnly, api.CreatedOn[:10]); err == nil {
				m.Date = d.Format(time.DateOnly)
			}
		}
	}
	err = writeAtomic(t.CacheDir, filepath.Join(t.CacheDir, "tranco-"+id+".json"), func(w io.Writer) error {
		return json.NewEncoder(w).Encode(m)
	})
	if err != nil {
		return TrancoList{}, fmt.Errorf("cache Tranco list: %w", err)
	}
	return TrancoList{Path: path, ID: id, Date: m.Date, Retrieved: m.Retrieved}, nil
}

// get fetches p from the service: into body if given (whose Close
// checks what came), else returned whole. More than limit bytes is an
// error, never a silently cut list.
func (t TrancoFetcher) get(ctx context.Context, p string, limit int64, body io.WriteCloser) ([]byte, error) {
	u := t.base() + p
	fail := func(err error) error { return fmt.Errorf("%w: %s: %w", ErrTrancoUnavailable, u, err) }
	c := t.Client
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fail(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the URL
		}
		return nil, fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fail(fmt.Errorf("HTTP %s", resp.Status))
	}
	var buf strings.Builder
	var w io.Writer = &buf
	if body != nil {
		w = body
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("larger than %d bytes", limit)
	}
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("got %d of %d bytes", n, resp.ContentLength)
	}
	if err == nil && body != nil {
		err = body.Close()
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("truncated: the connection closed after %d bytes", n)
		}
		return nil, fail(err)
	}
	return []byte(buf.String()), nil
}

// trancoCSV passes a download through and checks that it is a Tranco
// list: lines "rank,domain" (CRLF or LF) with ranks 1, 2, 3, ...; fewer
// than trancoListSize lines only if the last one is complete.
type trancoCSV struct {
	w       io.Writer
	partial []byte // the current line so far
	lines   int
	err     error
}

func (c *trancoCSV) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if _, err := c.w.Write(p); err != nil {
		c.err = err
		return 0, err
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(c.partial)+len(rest) > maxLineLen {
				c.err = fmt.Errorf("not a Tranco list: line %d is longer than %d bytes", c.lines+1, maxLineLen)
				return 0, c.err
			}
			c.partial = append(c.partial, rest...)
			break
		}
		c.partial = append(c.partial, rest[:i]...)
		rest = rest[i+1:]
		if c.err = c.line(); c.err != nil {
			return 0, c.err
		}
	}
	return len(p), nil
}

func (c *trancoCSV) line() error {
	c.lines++
	line := strings.TrimSuffix(string(c.partial), "\r")
	c.partial = c.partial[:0]
	rank, name, ok := strings.Cut(line, ",")
	if c.lines == 1 {
		rank = strings.TrimPrefix(rank, "\ufeff")
	}
	if !ok || rank != strconv.Itoa(c.lines) || name == "" || strings.ContainsAny(name, ", \t<>") {
		return fmt.Errorf("not a Tranco list: line %d is %q, want \"%d,DOMAIN\"", c.lines, truncate(line), c.lines)
	}
	return nil
}

// Close ends the check: the body is complete.
func (c *trancoCSV) Close() error {
	if c.err != nil {
		return c.err
	}
	if len(c.partial) > 0 {
		if c.lines+1 != trancoListSize {
			return fmt.Errorf("truncated: line %d has no end", c.lines+1)
		}
		if err := c.line(); err != nil {
			return err
		}
	}
	if c.lines == 0 {
		return fmt.Errorf("not a Tranco list: empty")
	}
	return nil
}

// writeAtomic writes path through a temporary file in dir, renamed into
// place only if write succeeds.
func writeAtomic(dir, path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(dir, ".tranco-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<16)
	if err := write(bw); err != nil {
		tmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// DefaultCacheDir is where lists are cached when neither a flag nor the
// config names a directory: the service's cache directory under systemd
// (CacheDirectory=mptester: /var/cache/mptester), else the user's.
func DefaultCacheDir() string {
	if d := os.Getenv("CACHE_DIRECTORY"); d != "" && filepath.IsAbs(d) {
		// systemd may list several, separated by colons; the first is ours.
		d, _, _ = strings.Cut(d, ":")
		return filepath.Join(d, "tranco")
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "mptester", "tranco")
	}
	return filepath.Join(d, "mptester", "tranco")
}
