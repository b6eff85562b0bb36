// Package e2e holds corral's end-to-end tests: they build the corral binary
// and drive real controller and node daemon processes on 127.0.0.1 through
// the CLI, as an operator and a user would.
//
// It has no code of its own besides this comment and the test harness in
// harness_test.go (process start/stop, free ports, CLI runs).
package e2e
