package rawprobe

// Test hooks (set by SetOverloadHooks only): a receive loop slowed on
// purpose and a small receive buffer make the host overload the survey
// must detect.
var (
	testRxHook func() // called before each received packet is handled
	testRcvBuf int    // raw socket receive buffer in bytes; 0: rawRcvBuf
)

// SetOverloadHooks slows every probe socket's receive loop on purpose (rx
// runs before each packet is handled) and shrinks its receive buffer to
// rcvBuf bytes (0: the default), until restore is called. Tests only.
func SetOverloadHooks(rx func(), rcvBuf int) (restore func()) {
	testRxHook, testRcvBuf = rx, rcvBuf
	return func() { testRxHook, testRcvBuf = nil, 0 }
}
