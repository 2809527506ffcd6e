//go:build !race

package interop

// raceDetector: built with -race.
const raceDetector = false
