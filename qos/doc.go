// Package qos is corral's quality-of-service policy, as pure functions over
// the QoS classes (api.QOS) they are given: what makes a QoS valid, the
// limits a QoS puts on a user's jobs (MaxWall, MaxJobsPerUser,
// MaxSubmitPerUser, GrpCPUs), who may preempt whom and in which mode, and
// the order victims are taken in.
//
// It owns the rules; it never touches state. The state package applies them
// where a change is committed (a QoS is put, a batch of jobs is submitted:
// MaxSubmitPerUser counts the jobs of the same entry), the scheduling pass
// where jobs start (Usage counts running jobs and CPUs as the pass starts
// more), and the controller where it answers a request early.
//
// The modes are cancel, requeue, suspend, migrate (the victim moves to a
// node with room) and checkpoint (it is parked in a file until room
// appears); Fallback says what preempts a victim that cannot move.
//
// The entry points are Check, SubmitLimit, Usage, MayPreempt, Mode,
// Fallback and CompareVictims.
package qos
