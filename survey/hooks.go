package survey

// Test hooks (set by export_test.go only): a receive loop slowed on
// purpose and a small receive buffer make the host overload the survey
// must detect.
var (
	testRxHook func() // called before each received packet is handled
	testRcvBuf int    // raw socket receive buffer in bytes; 0: rawRcvBuf
	// testHeldInMemory overrides heldInMemory; testNoSpill makes held
	// records stay in memory (as without a temporary directory).
	testHeldInMemory int
	testNoSpill      bool
)
