// Package api holds corral's wire types and the Go client that the CLI and
// the node daemon use to talk to the controllers.
//
// It owns the vocabulary shared by every process: job specifications, jobs and
// their states and pending reasons, nodes and their states, allocations (a
// node's desired state) and the reports a node sends back. It never contains
// business logic: validation of what a user typed lives in package submit,
// state transitions live in the controller's FSM.
//
// The main entry points are the types in job.go and node.go and NewClient.
package api
