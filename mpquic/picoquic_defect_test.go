package mpquic

import (
	"path/filepath"
	"testing"
)

// TestPicoquicSecondPathZero holds the recognizer of picoquic's path-ID
// race to picoquic's own qlogs: the client's trace of a failed run (it
// probed 127.0.0.2 as path 0 and closed on our ACK) is recognized; the
// start of a good run (the second address probed as path 1) is not, nor is
// either one with the other half of the evidence changed, so a failure of
// ours is never taken for picoquic's.
func TestPicoquicSecondPathZero(t *testing.T) {
	bad := readPicoquicQlog(t, filepath.Join("testdata", "picoquic-second-path-zero"), false)
	good := readPicoquicQlog(t, filepath.Join("testdata", "picoquic-second-path-one"), false)
	if bad.off || good.off {
		t.Skip("qlogs are not read in benchmark mode (MPTESTER_INTEROP_REFERENCE)")
	}
	if why := pqSecondPathZero(bad); why == "" {
		t.Errorf("failed run not recognized: challenges %v, closes sent %+v", bad.challenges, bad.closesSent)
	}
	if why := pqSecondPathZero(good); why != "" {
		t.Errorf("good run taken for the defect: %s", why)
	}
	if good.challenges[1] == 0 || good.challenges[0] != 0 {
		t.Errorf("good run: PATH_CHALLENGEs per path %v, want on path 1 only", good.challenges)
	}

	// A close on an ACK without the path-0 probe is not picoquic's race.
	good.closesSent = append(good.closesSent, pqClose{ErrorSpace: "transport", ErrorCode: uint64(ProtocolViolation), Trigger: "ack"})
	if why := pqSecondPathZero(good); why != "" {
		t.Errorf("a PROTOCOL_VIOLATION on ACK with the second path numbered 1 taken for the defect: %s", why)
	}
	// Nor is the path-0 probe with a close of another kind.
	for i := range bad.closesSent {
		bad.closesSent[i].Trigger = "stream"
	}
	if why := pqSecondPathZero(bad); why != "" {
		t.Errorf("a close on STREAM taken for the defect: %s", why)
	}
}
