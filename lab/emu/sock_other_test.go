//go:build !linux

package emu

import "testing"

// startTimedLink: in-memory devices off Linux.
func startTimedLink(t testing.TB, seed int64) *testLink { return startLink(t, seed) }
