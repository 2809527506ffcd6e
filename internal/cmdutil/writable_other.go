//go:build !unix

package cmdutil

// writable cannot be asked without opening on this OS; CreateOutput
// reports a failure as a usage error.
func writable(path, dir string) error { return nil }
