//go:build !race

package vmrun

// raceEnabled tells whether this test binary runs under the race detector.
const raceEnabled = false
