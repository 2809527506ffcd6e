package cmdutil

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/upload"
)

// Spooled is a measuring command's result on its way to the collect
// server: written into the spool as it is measured, committed at the end
// and uploaded unless --no-upload. A nil *Spooled (no upload: section)
// does nothing.
type Spooled struct {
	f        *Factory
	set      upload.Settings
	spool    *upload.Spool
	entry    *upload.Entry
	noUpload bool
	// failed is why the spool copy was given up (a full disk): the
	// measurement and its output go on without it.
	failed error
}

// Spool checks the config's upload section and opens the spool, before a
// command touches any output; nil without an upload section.
func (f *Factory) Spool(noUpload bool) (*Spooled, error) {
	if f.Config == nil || f.Config.Upload == nil {
		return nil, nil
	}
	set, err := f.UploadSettings()
	if err != nil {
		return nil, err
	}
	sp, err := upload.OpenSpool(set.SpoolDir, set.Quota)
	if err != nil {
		return nil, err
	}
	return &Spooled{f: f, set: set, spool: sp, noUpload: noUpload}, nil
}

// UploadSettings is the config's upload section, checked (usage error).
func (f *Factory) UploadSettings() (upload.Settings, error) {
	var c *upload.Config
	if f.Config != nil {
		c = f.Config.Upload
	}
	set, err := upload.SettingsFrom(c)
	switch {
	case err != nil && f.ConfigPath == "":
		return upload.Settings{}, fmt.Errorf("%w: %w (give --config FILE or $MPTESTER_CONFIG with an upload: section)", ErrUsage, err)
	case err != nil:
		return upload.Settings{}, fmt.Errorf("%w: config file %s: %w", ErrUsage, f.ConfigPath, err)
	}
	return set, nil
}

// OpenSpool calls open (a command's Spool hook) unless it is nil (tests).
func OpenSpool(open func(noUpload bool) (*Spooled, error), noUpload bool) (*Spooled, error) {
	if open == nil {
		return nil, nil
	}
	return open(noUpload)
}

// Start begins the result runID (ext ".jsonl" or ".json") in the spool.
func (s *Spooled) Start(runID, ext string) error {
	if s == nil {
		return nil
	}
	e, err := s.spool.Create(runID, ext)
	if err != nil {
		// A spool that cannot take the result never costs the
		// measurement: it is said at the end.
		s.failed = err
		return nil
	}
	s.entry = e
	return nil
}

// Writer is where the result goes besides the command's output. Its
// errors are never the output's: the first one gives the spool copy up.
func (s *Spooled) Writer() io.Writer {
	if s == nil || s.entry == nil {
		return io.Discard
	}
	return spoolWriter{s}
}

type spoolWriter struct{ s *Spooled }

func (w spoolWriter) Write(p []byte) (int, error) {
	if w.s.failed == nil && w.s.entry != nil {
		if _, err := w.s.entry.Write(p); err != nil {
			w.s.failed = err
			w.s.entry.Abort()
			w.s.entry = nil
		}
	}
	return len(p), nil
}

// Finish commits the result to the spool and uploads what is pending.
// measErr, the measurement's own outcome, wins the exit code; a good
// measurement that could not be uploaded is ErrNotUploaded (exit 8), the
// result kept in the spool for `mptester upload`.
func (s *Spooled) Finish(ctx context.Context, measErr error) error {
	if s == nil {
		return measErr
	}
	if s.failed == nil && s.entry != nil {
		if err := s.entry.Commit(); err != nil {
			s.entry.Abort()
			s.failed = err
		}
	}
	if s.failed != nil {
		s.f.Logger.Error("the spool copy of the result failed; the result is in the output only", "spool", s.spool.Dir(), "err", s.failed)
		if measErr != nil {
			return measErr
		}
		return fmt.Errorf("%w: the spool copy failed (%w); the result is in the output only", ErrNotUploaded, s.failed)
	}
	if s.entry == nil {
		return measErr
	}
	if s.noUpload || ctx.Err() != nil {
		return measErr
	}
	err := s.f.Upload(ctx, s.set, s.spool)
	if err == nil || measErr != nil {
		if err != nil {
			s.f.Logger.Warn("upload did not finish; the result stays in the spool", "err", err)
		}
		return measErr
	}
	return err
}

// Upload drains spool within set.Timeout; ErrNotUploaded when results are
// left pending, ErrRejected when the collector refused some for good.
func (f *Factory) Upload(ctx context.Context, set upload.Settings, sp *upload.Spool) error {
	ctx, cancel := context.WithTimeout(ctx, set.Timeout)
	defer cancel()
	dial, err := f.pathDialer(ctx, set.Path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotUploaded, err)
	}
	c := set.Client(dial)
	c.Logger = f.Logger
	res, err := c.Drain(ctx, sp)
	f.Logger.Info("upload", "uploaded", res.Uploaded, "duplicates", res.Duplicates, "rejected", res.Rejected, "pending", res.Pending, "spool", sp.Dir())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotUploaded, err)
	}
	if res.Rejected > 0 {
		return fmt.Errorf("%w: the collector refused %d (kept in %s; `mptester upload --status` shows its answers)", ErrRejected, res.Rejected, filepath.Join(sp.Dir(), "rejected"))
	}
	return nil
}

// pathDialer binds upload connections to the named path ("" none).
func (f *Factory) pathDialer(ctx context.Context, name string) (func(context.Context, string, string) (net.Conn, error), error) {
	if name == "" {
		return nil, nil
	}
	paths, err := f.DiscoverPaths(ctx, nil)
	if err != nil {
		return nil, err
	}
	p, err := probe.FindPath(paths, name)
	if err != nil {
		return nil, fmt.Errorf("upload.path: %w", err)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return probe.DialContext(ctx, p, network, addr)
	}, nil
}
