package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/mptester/mptester/internal/config"
)

// Factory carries what commands need, built once by the root command after
// global flags are parsed.
type Factory struct {
	IO     *IOStreams
	Logger *slog.Logger
	// Config is the parsed --config file (zero value when none).
	Config *config.Config
	// ConfigPath is the file Config came from ("" when none).
	ConfigPath string
}

// WriteJSON writes v indented to w, as every --json output does.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// FlagErrorf is a usage error (exit code 2).
func FlagErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// Usage marks err (bad flags, arguments or config values) as a usage error:
// exit code 2. Nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrUsage, err)
}
