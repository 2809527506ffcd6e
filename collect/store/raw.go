package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// OpenRaw opens a stored run's raw upload, byte for byte as the probe sent
// it: from the index for a small one (RawInline), else its file under the
// collector's data directory. Every reader of raw uploads (GET
// /v1/runs/{id}, reindex, reports) opens them here.
func OpenRaw(ctx context.Context, st Store, data string, r Run) (io.ReadCloser, error) {
	switch r.RawPath {
	case "":
		return nil, errors.New("the store has no raw upload for this run")
	case RawInline:
		b, err := st.GetRaw(ctx, r.RunID)
		if err != nil {
			return nil, fmt.Errorf("raw upload in the store: %w", err)
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	f, err := os.Open(filepath.Join(data, r.RawPath))
	if err != nil {
		return nil, fmt.Errorf("raw upload: %w", err)
	}
	return f, nil
}
