package noded

// SuspendGap lets the vm runner's daemon test (package noded_test, which
// may import vmrun) run the suspend scenario of the process runner's.
var SuspendGap = suspendGap
