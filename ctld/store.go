package ctld

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"corral/ctld/state"
)

// ReadStore rebuilds the state a member's data directory holds, without
// running a member: its newest snapshot, then every command of its Raft
// log after it, applied as a replica would. It returns the state and what
// the replay found wrong: an entry that does not decode, or one the apply
// refused that a replica could only have taken if the log was altered
// (audit records that do not match their hashes or chains). Run it on a
// copy: a running member holds the log's lock.
func ReadStore(dir string) (*state.State, []error, error) {
	if _, err := os.Stat(filepath.Join(dir, "raft.db")); err != nil {
		return nil, nil, fmt.Errorf("%s holds no controller's store (raft.db): %w", dir, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w (is a controller running on it? read a copy)", filepath.Join(dir, "raft.db"), err)
	}
	defer store.Close()
	s, from, err := newestSnapshot(dir)
	if err != nil {
		return nil, nil, err
	}
	last, err := store.LastIndex()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the log's last index: %w", err)
	}
	first, err := store.FirstIndex()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the log's first index: %w", err)
	}
	var problems []error
	if first > from+1 && last > 0 {
		problems = append(problems, fmt.Errorf("the log starts at entry %d but the snapshot ends at %d: entries %d to %d are missing", first, from, from+1, first-1))
	}
	for i := max(from+1, first); i <= last && last > 0; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			problems = append(problems, fmt.Errorf("log entry %d cannot be read: %w", i, err))
			continue
		}
		if l.Type != raft.LogCommand {
			continue
		}
		ct, p, err := state.Decode(l.Data)
		if err != nil {
			problems = append(problems, fmt.Errorf("log entry %d does not decode: %w", i, err))
			continue
		}
		res := s.Apply(l.Index, ct, p)
		if e, ok := res.(error); ok && ct == state.CmdAuditRecords {
			problems = append(problems, fmt.Errorf("log entry %d (%s): %w", i, ct, e))
		}
	}
	return s, problems, nil
}

// newestSnapshot reads dir's newest snapshot, or an empty state when it
// has none; it returns the index the snapshot ends at.
func newestSnapshot(dir string) (*state.State, uint64, error) {
	snaps, err := raft.NewFileSnapshotStore(dir, 2, discardWriter{})
	if err != nil {
		return nil, 0, fmt.Errorf("opening the snapshots in %s: %w", dir, err)
	}
	metas, err := snaps.List()
	if err != nil {
		return nil, 0, fmt.Errorf("listing the snapshots in %s: %w", dir, err)
	}
	if len(metas) == 0 {
		return state.New(), 0, nil
	}
	_, rc, err := snaps.Open(metas[0].ID)
	if err != nil {
		return nil, 0, fmt.Errorf("opening snapshot %s: %w", metas[0].ID, err)
	}
	defer rc.Close()
	s, err := state.ReadSnapshot(rc)
	if err != nil {
		return nil, 0, fmt.Errorf("reading snapshot %s: %w", metas[0].ID, err)
	}
	return s, metas[0].Index, nil
}

// discardWriter drops the snapshot store's own log lines.
type discardWriter struct{}

func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
