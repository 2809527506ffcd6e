package survey

// Test hooks (set by tests only).
var (
	// testNoSpill makes held records stay in memory (as without a
	// temporary directory).
	testNoSpill bool
)
