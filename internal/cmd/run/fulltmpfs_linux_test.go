package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/config"
	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/report"
	"github.com/mptester/mptester/upload"
)

// TestFullTmpfsSpool: `run -o` with its spool on a real full filesystem (a
// tmpfs of a few pages, filled before the run) measures, writes -o whole
// (a valid document) and says that the spool copy failed; the spool is
// left with no partial result.
func TestFullTmpfsSpool(t *testing.T) {
	if os.Geteuid() != 0 {
		nstest.SkipUnless(t, "mounting a tmpfs needs root")
	}
	tp, qp, mp, pin := startServerMPQUIC(t, false)
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	if err := os.Mkdir(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", spool, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=16k,mode=0700"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(spool, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", spool, err)
		}
	})
	// The spool's directories first, then fill what is left.
	if _, err := upload.OpenSpool(spool, upload.Quota{}); err != nil {
		t.Fatal(err)
	}
	fill, err := os.Create(filepath.Join(spool, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := fill.Write(make([]byte, 1024)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the tmpfs: %v", err)
			}
			break
		}
	}
	fill.Close()

	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	io, _, errOut := cmdutil.Test()
	f := &cmdutil.Factory{IO: io, Logger: slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Config: &config.Config{Upload: &upload.Config{URL: "https://127.0.0.1:1/", TokenFile: tokenFile, Spool: spool}}}
	out := filepath.Join(dir, "run.json")
	cmd := NewCmdRun(f, nil)
	cmd.SetArgs([]string{"--no-upload", "-o", out, "--smoke", "--server", "127.0.0.1", "--tcp-port", fmt.Sprint(tp), "--quic-port", fmt.Sprint(qp),
		"--quic-alt-port", fmt.Sprint(qp), "--mpquic-port", fmt.Sprint(mp), "--pin", pin, "--paths", "lo", "--interval", "50ms", "--ping-count", "3", "--duration", "300ms"})
	cmd.SetContext(context.Background())
	err = cmd.Execute()
	if !errors.Is(err, cmdutil.ErrNotUploaded) || !strings.Contains(err.Error(), "the spool copy failed") {
		t.Fatalf("want ErrNotUploaded saying the spool copy failed, got %v\n%s", err, errOut)
	}
	b, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if verr := report.ValidateDocument(b); verr != nil {
		t.Fatalf("-o is not a whole valid document (%d bytes): %v", len(b), verr)
	}
	if !strings.Contains(errOut.String(), "the spool copy of the result failed") {
		t.Errorf("stderr does not say the spool copy failed:\n%s", errOut)
	}
	// Nothing half-written is left for the uploader.
	err = filepath.WalkDir(spool, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "filler" {
			t.Errorf("left in the spool: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
