//go:build !linux

package survey

// Other systems: the probe sockets' own signals only.
func newHostCounters([]string) hostCounters { return nil }
