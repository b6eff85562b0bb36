// Package reservation reads an advance reservation's specification as
// scontrol writes it — ReservationName, StartTime, EndTime, Duration,
// Nodes, NodeCnt, PartitionName, Users, Accounts, Flags and TRES, each
// KEY=VALUE (and Users+=, Flags-= ... on an update) — into an
// api.Reservation, with errors that name the key and say what to write.
//
// Apply is the entry point: it changes a reservation (a new one, or the
// current one on an update) by the settings and returns the Selection the
// controllers still have to make against the cluster's state (ALL nodes,
// a node count, a TRES block to place). The controllers run it on every
// request (the CLI sends the settings as typed); the state checks the
// result once more when it applies it (state.CheckReservation).
//
// The parsers for times (ParseTime), durations (ParseDuration), flags
// (ParseFlags), TRES (ParseTRES) and node lists (ParseNodes) each have a
// fuzz target: they read what any client sends.
//
// The package never reads the clock or the cluster: "now" is passed in.
package reservation
