//go:build !corral_client

package main

import (
	"fmt"
	"strconv"

	"corral/ctld"
	"corral/internal/getopt"
)

// raftOptions are ctld's Raft options beyond --peers: joining a running
// cluster, and the log compaction knobs (how often a member snapshots its
// state and how much log it keeps behind a snapshot, for members that
// fall a little behind; one further behind is sent the snapshot).
func raftOptions() []getopt.Option {
	return []getopt.Option{
		valued(0, "join", "URL,...", "add this member to a running cluster instead of --peers: ask these members' APIs (any one will do) to add it as a voter"),
		valued(0, "raft-snapshot-interval", "DURATION", "how often a member checks whether to snapshot its state (default 30s)"),
		valued(0, "raft-snapshot-entries", "N", "log entries since the last snapshot that make a member take one (default 16384)"),
		valued(0, "raft-trailing-logs", "N", "log entries a member keeps behind its snapshot (default 10240)"),
	}
}

// raftTuning reads raftOptions.
func raftTuning(o *optSet) (ctld.RaftTuning, error) {
	var t ctld.RaftTuning
	var err error
	if t.SnapshotInterval, err = parseDuration("raft-snapshot-interval", o.get("raft-snapshot-interval"), 0); err != nil {
		return t, err
	}
	for name, dst := range map[string]*uint64{"raft-snapshot-entries": &t.SnapshotEntries, "raft-trailing-logs": &t.TrailingLogs} {
		if v := o.get(name); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 {
				return t, fmt.Errorf("--%s=%s: give a whole number of log entries, at least 1", name, v)
			}
			*dst = n
		}
	}
	return t, nil
}
