//go:build !linux

package probe

import (
	"context"
	"fmt"
	"time"
)

// WatchChanges has no implementation off Linux (macOS's route socket and
// Windows' NotifyIpInterfaceChange would fit; not done): it returns
// ErrUnsupported and callers poll Discover on their safety ticker.
func WatchChanges(ctx context.Context) (<-chan time.Time, error) {
	return nil, fmt.Errorf("watch path changes: %w", ErrUnsupported)
}
