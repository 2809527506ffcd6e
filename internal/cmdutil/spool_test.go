package cmdutil

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/upload"
)

// TestSpoolFailureNeverCostsTheMeasurement: a spool that cannot take the
// result (it cannot be created, or a write fails: a full disk) leaves the
// output whole and the command says so (ErrNotUploaded), rather than
// failing the measurement.
func TestSpoolFailureNeverCostsTheMeasurement(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, dir string, s *Spooled)
	}{
		{"create fails", func(t *testing.T, dir string, s *Spooled) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "tmp")))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "tmp"), nil, 0o600))
		}},
		{"write fails", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sp, err := upload.OpenSpool(dir, upload.Quota{})
			require.NoError(t, err)
			s := &Spooled{f: &Factory{Logger: slog.New(slog.DiscardHandler)}, spool: sp, noUpload: true}
			if tc.breakIt != nil {
				tc.breakIt(t, dir, s)
			}
			require.NoError(t, s.Start("r1", ".json"))
			if tc.breakIt == nil {
				s.entry.Abort() // its file closed: the next write fails
			}
			n, err := s.Writer().Write([]byte(`{"a":1}`))
			assert.NoError(t, err, "the output's writes never fail for the spool")
			assert.Equal(t, 7, n)
			err = s.Finish(context.Background(), nil)
			assert.ErrorIs(t, err, ErrNotUploaded)
			assert.ErrorContains(t, err, "the spool copy failed")
			left, _ := sp.Pending()
			assert.Empty(t, left)
		})
	}
}
