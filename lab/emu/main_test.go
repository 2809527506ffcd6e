package emu

import (
	"os"
	"strconv"
	"testing"
)

func TestMain(m *testing.M) {
	// Knobs for comparing scheduling variants by hand.
	if v, err := strconv.Atoi(os.Getenv("EMU_RTPRIO")); err == nil {
		RealtimePriority = v
	}
	if v, err := strconv.ParseInt(os.Getenv("EMU_SPIN_NS"), 10, 64); err == nil {
		spinNs = v
	}
	if os.Getenv("EMU_NORESERVE") != "" {
		ReserveProcs = false
	}
	os.Exit(m.Run())
}
