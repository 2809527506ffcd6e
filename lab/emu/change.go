package emu

import (
	"context"
	"io"
	"time"
)

// Change is a set of parameter edits parsed from settings syntax
// ("delay=200ms loss=30% up.rate=10mbit down"). Nil fields are unchanged.
type Change struct {
	Dir  [2]FieldChange // indexed by Direction
	Down *bool          // link down/up
}

// FieldChange holds the fields set for one direction.
type FieldChange struct {
	Delay      *time.Duration
	Jitter     *time.Duration
	Loss       *float64
	GE         **GilbertElliott // set to a nil pointer to clear (ge=off)
	RateBps    *int64
	QueueBytes *int
}

// ParseChange parses settings tokens.
func ParseChange(args []string) (Change, error) { return Change{}, nil }

// Apply applies c to the link.
func (l *Link) Apply(c Change) {}

// Event of a timeline: at time At since start, apply Change to Path.
type Event struct {
	At     time.Duration
	Path   string
	Change Change
}

// ParseTimeline parses a timeline file.
func ParseTimeline(r io.Reader) ([]Event, error) { return nil, nil }

// RunTimeline applies each event at its time since the call.
func RunTimeline(ctx context.Context, events []Event, links map[string]*Link) error { return nil }
