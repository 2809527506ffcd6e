package list

import (
	"os"

	"github.com/mptester/mptester/survey/internal/spill"
)

// SURVEY_TEST_SPILL=1 runs the package's tests with a tiny spill
// threshold, so every list keeps its names in a temporary file.
func init() {
	if os.Getenv("SURVEY_TEST_SPILL") != "" {
		spill.TestBytesAt = 64
	}
}
