//go:build !linux

package report

func kernelVersion() string { return "" }
