//go:build !darwin

package nw

// System is Network.framework; only macOS has it.
func System() (API, error) { return nil, ErrUnsupported }
