package state

import (
	"bytes"
	"iter"
	"maps"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func spec(name string) JobSpec {
	return JobSpec{Name: name, User: "alice", InlineScript: &InlineScript{Script: "#!/bin/sh\necho hi\n"}, NTasks: 1, CPUsPerTask: 1, RequestID: "req-" + name}
}

// logEntry is one entry of a test log: a framed command at its index, as
// Raft hands it to a replica.
type logEntry struct {
	Index uint64
	Data  []byte
}

// entry frames a command as a log entry at index.
func entry(tb testing.TB, index uint64, ct CommandType, payload any) *logEntry {
	tb.Helper()
	data, err := Encode(ct, payload)
	if err != nil {
		tb.Fatal(err)
	}
	return &logEntry{Index: index, Data: data}
}

// replica applies test logs to a State as a controller member does: decode,
// then apply at the entry's index.
type replica struct{ s *State }

func newReplica() *replica { return &replica{s: New()} }

// Apply applies one entry; an entry that does not decode fails the test's
// goroutine with a panic, as it stops a member.
func (r *replica) Apply(e *logEntry) any {
	t, cmd, err := Decode(e.Data)
	if err != nil {
		panic(err)
	}
	return r.s.Apply(e.Index, t, cmd)
}

// Read runs fn over the
func (r *replica) Read(fn func(s *State)) { fn(r.s) }

// Hash is the state's hash.
func (r *replica) Hash() string { return r.s.Hash() }

func applyAll(tb testing.TB, r *replica, logs []*logEntry) {
	tb.Helper()
	for _, l := range logs {
		r.Apply(l)
	}
}

// restoredCopy writes a snapshot of r and reads it into a new replica.
func restoredCopy(tb testing.TB, r *replica) *replica {
	tb.Helper()
	var buf bytes.Buffer
	if err := r.s.Snapshot().Write(&buf); err != nil {
		tb.Fatal(err)
	}
	s, err := ReadSnapshot(&buf)
	if err != nil {
		tb.Fatalf("a snapshot this build wrote does not read back: %v", err)
	}
	return &replica{s: s}
}

// restoreAfter applies logs[:n] to a replica, restores a copy of it from
// a snapshot, feeds both the rest of logs, and fails unless they agree
// after the restore and at the end. It returns both replicas.
func restoreAfter(tb testing.TB, logs []*logEntry, n int) (applied, restored *replica) {
	tb.Helper()
	f := newReplica()
	applyAll(tb, f, logs[:n])
	g := restoredCopy(tb, f)
	if f.Hash() != g.Hash() {
		tb.Fatalf("after entry %d: state after restore differs", n)
	}
	applyAll(tb, f, logs[n:])
	applyAll(tb, g, logs[n:])
	if f.Hash() != g.Hash() {
		tb.Fatalf("after entry %d: replicas diverged after restore", n)
	}
	return f, g
}

// run returns job id's newest allocation, or an empty one when it has none.
func run(s *State, id uint64) *Allocation {
	if j := s.Jobs[id]; j != nil {
		if a := s.LastAlloc(j); a != nil {
			return a
		}
	}
	return &Allocation{}
}

func mapsKeys[K comparable, V any](m map[K]V) iter.Seq[K] { return maps.Keys(m) }
