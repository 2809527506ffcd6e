//go:build !linux

package capture

import "context"

// Capture is Linux only.
type Capture struct{}

// Start is Linux only.
func Start(ctx context.Context, o Options) (*Capture, error) { return nil, ErrUnsupported }

// Stop is Linux only.
func (c *Capture) Stop() Result { return Result{} }
