package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// CheckOutput refuses an output file that cannot be written or that names
// one of the inputs, before anything is opened: a bad value must leave
// every file as it was. "" and "-" mean stdout.
func CheckOutput(path string, inputs ...string) error {
	if path == "" || path == "-" {
		return nil
	}
	for _, in := range inputs {
		if in != "" && in != "-" && SameFile(in, path) {
			return fmt.Errorf("%s names an input file (%s); write to another file", path, in)
		}
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s is a directory", path)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("%s: directory %s: %v", path, dir, errors.Unwrap(err))
	case !st.IsDir():
		return fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	if err := writable(path, dir); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

// CreateOutput opens a checked output for writing ("-": out). Called only
// once every input is valid; a failure here is still the user's path.
func CreateOutput(flag, path string, out io.Writer) (io.Writer, func() error, error) {
	if path == "" || path == "-" {
		return out, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, Usage(fmt.Errorf("%s: %w", flag, err))
	}
	return f, f.Close, nil
}

// WriteOutput writes b, rendered in full beforehand so a failure leaves
// the output untouched, to the checked output ("-": out).
func WriteOutput(flag, path string, out io.Writer, b []byte) error {
	w, closeOut, err := CreateOutput(flag, path, out)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		closeOut()
		return err
	}
	return closeOut()
}

// SameFile reports whether a and b name one file (by inode when both
// exist, else by absolute path).
func SameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(sa, sb)
	}
	aa, _ := filepath.Abs(a)
	bb, _ := filepath.Abs(b)
	return aa == bb
}

// OutputFlag adds -o, --output: the one name of the output file on every
// command that writes one. --out stays as a hidden alias for one release.
func OutputFlag(cmd *cobra.Command, p *string, usage string) {
	fl := cmd.Flags()
	fl.StringVarP(p, "output", "o", "-", usage)
	fl.StringVar(p, "out", "-", "alias of --output")
	_ = fl.MarkHidden("out")
	cmd.MarkFlagsMutuallyExclusive("output", "out")
}
