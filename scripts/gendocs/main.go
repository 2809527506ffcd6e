// Command gendocs writes mptester's man pages and shell completions from
// its cobra command tree, so they always match the binary they ship with:
//
//	go run ./scripts/gendocs DIR
//
// DIR/man/mptester*.1.gz (one page per command, section 1) and
// DIR/completions/{mptester.bash,_mptester,mptester.fish}. goreleaser runs
// it before packaging; the .deb/.rpm install them (goreleaser.yaml).
// Output is reproducible: no generation tag, the date from
// SOURCE_DATE_EPOCH when set, gzip without name or time.
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/mptester/mptester/internal/cmd/root"
	"github.com/mptester/mptester/internal/cmdutil"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/gendocs DIR")
		os.Exit(2)
	}
	if err := generate(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func generate(dir string) error {
	f := &cmdutil.Factory{IO: cmdutil.System(), Logger: slog.New(slog.DiscardHandler)}
	cmd := root.NewCmdRoot(f)
	setNoTag(cmd)

	man := filepath.Join(dir, "man")
	tmp := filepath.Join(dir, "man.tmp")
	for _, d := range []string{man, tmp, filepath.Join(dir, "completions")} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	hdr := &doc.GenManHeader{Title: "MPTESTER", Section: "1", Source: "mptester", Manual: "mptester manual"}
	if err := doc.GenManTree(cmd, hdr, tmp); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	pages, err := os.ReadDir(tmp)
	if err != nil {
		return err
	}
	for _, p := range pages {
		b, err := os.ReadFile(filepath.Join(tmp, p.Name()))
		if err != nil {
			return err
		}
		if err := writeGzip(filepath.Join(man, p.Name()+".gz"), b); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}

	comp := map[string]func(io.Writer) error{
		"mptester.bash": func(w io.Writer) error { return cmd.GenBashCompletionV2(w, true) },
		"_mptester":     cmd.GenZshCompletion,
		"mptester.fish": func(w io.Writer) error { return cmd.GenFishCompletion(w, true) },
	}
	for name, gen := range comp {
		var b bytes.Buffer
		if err := gen(&b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "completions", name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("gendocs: %d man pages in %s, completions (bash, zsh, fish) in %s\n", len(pages), man, filepath.Join(dir, "completions"))
	return nil
}

func setNoTag(c *cobra.Command) {
	c.DisableAutoGenTag = true
	for _, s := range c.Commands() {
		setNoTag(s)
	}
}

// writeGzip compresses as gzip -n does (no name, no time): reproducible.
func writeGzip(path string, b []byte) error {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(b); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}
