package mpquic

import (
	"path/filepath"
	"testing"
)

// TestPicoquicSecondPathZero holds the recognizer of picoquic's path-ID
// race to picoquic's own qlogs: the client's trace of a failed run (it
// probed 127.0.0.2 as path 0 and closed on our ACK) is recognized; the
// start of a good run (the second address probed as path 1) is not, even
// with a PROTOCOL_VIOLATION on an ACK added, nor is the failed run
// without its probe on path 0: a failure of ours is not taken for
// picoquic's.
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
	good.closesSent = append(good.closesSent, pqClose{ErrorSpace: "transport", ErrorCode: uint64(ProtocolViolation), Trigger: "ack"})
	if why := pqSecondPathZero(good); why != "" {
		t.Errorf("a PROTOCOL_VIOLATION on ACK with the second path numbered 1 taken for the defect: %s", why)
	}
	bad.challenges[1] += bad.challenges[0]
	bad.challenges[0] = 0
	if why := pqSecondPathZero(bad); why != "" {
		t.Errorf("the failed run with its probe on path 1 taken for the defect: %s", why)
	}
}
