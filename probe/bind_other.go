//go:build !linux && !darwin && !windows

package probe

const mptcpSupported = false

// Other systems: rely on the source address alone.
func bindToPath(uintptr, Path, Family) error { return nil }
