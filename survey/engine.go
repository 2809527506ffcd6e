package survey

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/survey/internal/rawprobe"
)

// The probing engine (package survey/internal/rawprobe) as the survey's
// callers see it: one probe at a time from one path.
type (
	Engine        = rawprobe.Engine
	EngineOptions = rawprobe.Options
	Target        = rawprobe.Target
	Result        = rawprobe.Result
)

// Methods is the registry of probe methods.
var Methods = rawprobe.Methods

// MethodNames lists the registry, sorted.
func MethodNames() []string { return rawprobe.MethodNames() }

// CheckMethod checks a probe method name against the registry.
func CheckMethod(s string) error {
	if names := MethodNames(); !slices.Contains(names, s) {
		return fmt.Errorf("unknown method %q (want one of %s)", s, strings.Join(names, ", "))
	}
	return nil
}

// NewEngine builds the engine of method bound to path p.
func NewEngine(ctx context.Context, method string, p probe.Path, opts EngineOptions) (Engine, error) {
	return rawprobe.New(ctx, method, p, opts)
}
