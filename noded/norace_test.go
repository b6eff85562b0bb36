//go:build !race

package noded_test

// raceEnabled tells whether this test binary runs under the race detector.
const raceEnabled = false
