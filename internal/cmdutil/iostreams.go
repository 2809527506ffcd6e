package cmdutil

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams separates data (Out) from logs and progress (ErrOut).
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	outTTY, errTTY bool
}

// System returns the process streams, noting which are terminals.
func System() *IOStreams {
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		outTTY: isTerminal(os.Stdout), errTTY: isTerminal(os.Stderr)}
}

// Test returns in-memory streams that are not terminals.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}, out, errOut
}

// IsStdoutTTY: draw tables and colour only for a person.
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }

// IsStderrTTY: draw progress only for a person.
func (s *IOStreams) IsStderrTTY() bool { return s.errTTY }

// SetTTY forces terminal behaviour in tests.
func (s *IOStreams) SetTTY(out, err bool) { s.outTTY, s.errTTY = out, err }

func isTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}
