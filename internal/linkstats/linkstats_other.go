//go:build !linux

package linkstats

func read(names []string, dst []Counters, found []bool) error { return ErrUnsupported }
