package survey

import (
	"os"

	"github.com/mptester/mptester/survey/internal/spill"
)

// SURVEY_TEST_SPILL=1 runs the package's tests (the lab truth tests
// included) with tiny spill thresholds, so every run keeps its domain
// names, its per-address domains, its address records and its held probe
// records in temporary files.
func init() {
	if os.Getenv("SURVEY_TEST_SPILL") != "" {
		spill.TestBytesAt, spill.TestGroupsAt, spill.TestQueueInMemory, testAddrMemRecords = 64, 5, 2, 3
	}
}
