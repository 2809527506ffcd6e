package survey

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// DefaultTrancoURL is where --list-id downloads from.
const DefaultTrancoURL = "https://tranco-list.eu"

var trancoID = regexp.MustCompile(`^[A-Z0-9]{1,16}$`)

// TrancoFetcher downloads Tranco lists into a cache directory; a list id
// names an immutable list, so a cached file is never fetched again.
type TrancoFetcher struct {
	BaseURL  string // DefaultTrancoURL when empty
	CacheDir string
	Client   *http.Client
}

// Fetch returns the cached path of list id ("latest" asks the server for the
// id of today's list) and the id and time it was retrieved.
func (t TrancoFetcher) Fetch(ctx context.Context, id string) (path, resolvedID string, retrieved time.Time, err error) {
	if t.CacheDir == "" {
		return "", "", time.Time{}, fmt.Errorf("no cache directory for Tranco lists")
	}
	if id == "latest" {
		b, err := t.get(ctx, "/top-1m-id", 64)
		if err != nil {
			return "", "", time.Time{}, fmt.Errorf("ask Tranco for the latest list id: %w", err)
		}
		id = strings.TrimSpace(string(b))
	}
	if !trancoID.MatchString(id) {
		return "", "", time.Time{}, fmt.Errorf("invalid Tranco list id %q", truncate(id))
	}
	path = filepath.Join(t.CacheDir, "tranco-"+id+".csv")
	if st, err := os.Stat(path); err == nil {
		return path, id, st.ModTime().UTC(), nil
	}
	b, err := t.get(ctx, "/download/"+id+"/1000000", 128<<20)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("download Tranco list %s: %w", id, err)
	}
	if err := os.MkdirAll(t.CacheDir, 0o755); err != nil {
		return "", "", time.Time{}, fmt.Errorf("create cache directory: %w", err)
	}
	// Write then rename so an interrupted download never leaves a truncated
	// file that would be trusted next time.
	tmp, err := os.CreateTemp(t.CacheDir, ".tranco-*")
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("cache Tranco list: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return "", "", time.Time{}, fmt.Errorf("cache Tranco list: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", "", time.Time{}, fmt.Errorf("cache Tranco list: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", "", time.Time{}, fmt.Errorf("cache Tranco list: %w", err)
	}
	return path, id, time.Now().UTC(), nil
}

func (t TrancoFetcher) get(ctx context.Context, p string, limit int64) ([]byte, error) {
	base := t.BaseURL
	if base == "" {
		base = DefaultTrancoURL
	}
	c := t.Client
	if c == nil {
		c = &http.Client{Timeout: 2 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+p, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit))
}

// DefaultCacheDir is where lists are cached when the config names none.
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "mptester", "tranco")
	}
	return filepath.Join(d, "mptester", "tranco")
}
