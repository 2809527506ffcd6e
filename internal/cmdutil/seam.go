package cmdutil

import (
	"context"
	"errors"
	"log/slog"

	"github.com/spf13/cobra"
)

type seamKey struct{}

// Dispatch is the end of every command's RunE: the parsed options go to
// runF when a test planted one (the seam), else to the command's run.
func Dispatch[O any](ctx context.Context, opts *O, runF, run func(context.Context, *O) error) error {
	if runF != nil {
		return runF(ctx, opts)
	}
	return run(ctx, opts)
}

// TestFactory is a factory for tests of the runF seam: in-memory streams,
// a logger that drops everything, no config.
func TestFactory() *Factory {
	ios, _, _ := Test()
	return &Factory{IO: ios, Logger: slog.New(slog.DiscardHandler)}
}

// RunSeam is for tests of a command's runF seam: it builds the command
// with a runF that captures the options, runs it with args, and returns
// what the flags and arguments parsed into. It fails when runF is not
// called, or not with the context the command ran under.
func RunSeam[O any](build func(*Factory, func(context.Context, *O) error) *cobra.Command, f *Factory, args ...string) (*O, error) {
	var got *O
	var gotCtx context.Context
	cmd := build(f, func(ctx context.Context, o *O) error { got, gotCtx = o, ctx; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	if err := cmd.ExecuteContext(context.WithValue(context.Background(), seamKey{}, true)); err != nil {
		return nil, err
	}
	switch {
	case got == nil:
		return nil, errors.New("runF was not called")
	case gotCtx == nil || gotCtx.Value(seamKey{}) != true:
		return nil, errors.New("runF did not get the command's context")
	}
	return got, nil
}
