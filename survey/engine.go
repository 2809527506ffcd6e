package survey

import (
	"context"

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

// NewEngine builds the engine of method bound to path p.
func NewEngine(ctx context.Context, method string, p probe.Path, opts EngineOptions) (Engine, error) {
	return rawprobe.New(ctx, method, p, opts)
}
