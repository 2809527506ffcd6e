//go:build !linux

package emu

// LowLatency has no effect off Linux.
var LowLatency = true

func holdLowLatency() (release func()) { return func() {} }
