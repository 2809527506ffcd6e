package survey

import "os"

// SURVEY_TEST_SPILL=1 runs the package's tests (the lab truth tests
// included) with tiny spill thresholds, so every run keeps its domain
// names and its per-address domains in temporary files.
func init() {
	if os.Getenv("SURVEY_TEST_SPILL") != "" {
		testSpillNamesAt, testDomSpillAt = 64, 5
	}
}
