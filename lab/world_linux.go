package lab

import "context"

// worldState is the synthetic Internet served by the lab.
type worldState struct{}

// startWorld generates (or loads) the world, writes its files and serves
// its DNS views.
func (l *Lab) startWorld(ctx context.Context) error { return nil }
