package display

import (
	"strings"
	"testing"

	"corral/api"
)

func TestStatus(t *testing.T) {
	tests := map[string]struct {
		status api.ClusterStatus
		want   string
	}{
		"three members": {
			api.ClusterStatus{
				Self: "c2", Leader: "c1", State: "Follower", Term: 4,
				CommitIndex: 120, AppliedIndex: 119, LastIndex: 121,
				Members: []api.Member{
					{ID: "c1", RaftAddr: "10.0.0.1:7100", HTTPAddr: "http://10.0.0.1:7001", Voter: true, Leader: true},
					{ID: "c2", RaftAddr: "10.0.0.2:7100", HTTPAddr: "http://10.0.0.2:7001", Voter: true},
					{ID: "c3", RaftAddr: "10.0.0.3:7100", Voter: false},
				},
				Nodes: map[string]int{"IDLE": 3, "MIXED": 1, "DOWN": 1, "DRAINED": 1, "ALLOCATED": 0},
				Jobs:  map[string]int{"PENDING": 4, "RUNNING": 3, "COMPLETED": 5, "weird": 1},
			},
			`Member: c2 (Follower)
Leader: c1
Term:   4
Index:  commit=120 applied=119 last=121

ID  RAFT ADDRESS   HTTP ADDRESS          ROLE      VOTER
c1  10.0.0.1:7100  http://10.0.0.1:7001  leader    yes
c2  10.0.0.2:7100  http://10.0.0.2:7001  follower  yes
c3  10.0.0.3:7100  -                     follower  no

Nodes:  6 (idle 3, mixed 1, down 1, drained 1)
Jobs:   13 (pending 4, running 3, completed 5, weird 1)
`,
		},
		"no leader, nothing counted": {
			api.ClusterStatus{Self: "c1", State: "Candidate", Term: 9},
			`Member: c1 (Candidate)
Leader: (none)
Term:   9
Index:  commit=0 applied=0 last=0

ID  RAFT ADDRESS  HTTP ADDRESS  ROLE  VOTER

Nodes:  0
Jobs:   0
`,
		},
		"lower-case keys": {
			api.ClusterStatus{
				Self: "c1", Leader: "c1",
				Nodes: map[string]int{"down": 2, "idle": 1},
				Jobs:  map[string]int{"running": 1, "pending": 2},
			},
			`Member: c1
Leader: c1
Term:   0
Index:  commit=0 applied=0 last=0

ID  RAFT ADDRESS  HTTP ADDRESS  ROLE  VOTER

Nodes:  3 (idle 1, down 2)
Jobs:   3 (pending 2, running 1)
`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			Status(&b, &tc.status)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}
