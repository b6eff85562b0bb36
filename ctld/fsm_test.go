package ctld

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"corral/api"
	"corral/ctld/state"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func spec(name string) api.JobSpec {
	return api.JobSpec{Name: name, User: "alice", Script: "#!/bin/sh\necho hi\n", NTasks: 1, CPUsPerTask: 1, RequestID: "req-" + name}
}

// entry frames a command as a Raft log entry at index.
func entry(t *testing.T, index uint64, ct state.CommandType, payload any) *raft.Log {
	t.Helper()
	data, err := state.Encode(ct, payload)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func applyAll(t *testing.T, f *FSM, logs []*raft.Log) {
	t.Helper()
	for _, l := range logs {
		f.Apply(l)
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }
func (m *memSink) Close() error  { return nil }

func TestUnknownCommandStopsTheFSM(t *testing.T) {
	f := NewFSM(quietLog())
	defer func() {
		if recover() == nil {
			t.Fatal("an unknown command type was applied silently")
		}
	}()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{200, '{', '}'}})
}

func afterok(ids ...string) *api.Dependency {
	return &api.Dependency{Raw: "afterok:" + strings.Join(ids, ":"), Clauses: []api.DepClause{{Type: "afterok", JobIDs: ids}}}
}

// stateSpecs converts requests as the controller does before proposing
// them.
func stateSpecs(specs ...api.JobSpec) []state.JobSpec {
	out := make([]state.JobSpec, len(specs))
	for i := range specs {
		out[i] = stateSpec(&specs[i])
	}
	return out
}
