package spill

// Test thresholds (set by tests only): when > 0 each replaces how much its
// structure keeps in memory, so a small input goes through the temporary
// files.
var (
	TestBytesAt       int // Bytes: bytes before the file
	TestGroupsAt      int // Groups: pairs in memory, and entries a grouping pass fills
	TestQueueInMemory int // Queue: items in memory
)
