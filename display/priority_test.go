package display

import (
	"strings"
	"testing"

	"corral/api"
)

func TestPriorities(t *testing.T) {
	weights := api.DefaultSchedConfig().Weights
	rows := []api.PriorityRow{
		// Weighted: age 0.0123457×1000 rounds to 12, fair-share and QoS
		// 0.5×10000 = 5000, job size 0.25×1000 = 250, partition 1×1000.
		{JobID: 12, Ref: "12", User: "alice", Account: "physics", QOS: "normal", Partition: "batch", Priority: 10623,
			Age: 0.0123457, Fairshare: 0.5, QOSF: 0.5, PartF: 1, JobSize: 0.25, Weights: weights},
		// Every text cell is cut to its column, as sprio cuts.
		{JobID: 13, Ref: "13_[0-99%4]", User: "averyverylongname", Account: "averyverylongaccount",
			Partition: "verylongpartition", Priority: -3, Nice: 5, Weights: weights},
		// No Ref: the bare id.
		{JobID: 14, User: "bob", Account: "bio", Partition: "debug", Priority: 1, Weights: weights},
	}
	tests := map[string]struct {
		rows []api.PriorityRow
		opts PriorityOptions
		want string
	}{
		"weighted": {rows, PriorityOptions{}, `          JOBID PARTITION     USER    ACCOUNT   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS        NICE
             12 batch        alice    physics      10623          0         12       5000        250       1000       5000           0
    13_[0-99%4] verylongp averyver averyveryl         -3          0          0          0          0          0          0           5
             14 debug          bob        bio          1          0          0          0          0          0          0           0
`},
		// PRIORITY is priority / (2^32-1) printed "%16.14f" and cut to ten
		// characters, as sprio -n prints it.
		"normalized": {rows[:2], PriorityOptions{Normalized: true}, `          JOBID PARTITION     USER    ACCOUNT   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS        NICE
             12 batch        alice    physics 0.00000247  0.0000000  0.0123457  0.5000000  0.2500000  1.0000000  0.5000000           0
    13_[0-99%4] verylongp averyver averyveryl -0.0000000  0.0000000  0.0000000  0.0000000  0.0000000  0.0000000  0.0000000           5
`},
		"no header": {rows[2:], PriorityOptions{NoHeader: true}, `             14 debug          bob        bio          1          0          0          0          0          0          0           0
`},
		// 1.5 and 2.5 are ties: "%.0f" rounds them to even, 2 and 2.
		"rounding ties to even": {[]api.PriorityRow{{JobID: 1, Partition: "p", User: "u", Account: "a", Priority: 4,
			Age: 0.5, Fairshare: 0.5, Weights: api.PriorityWeights{Age: 3, Fairshare: 5}}}, PriorityOptions{NoHeader: true},
			`              1 p                u          a          4          0          2          2          0          0          0           0
`},
		"no jobs": {nil, PriorityOptions{}, `          JOBID PARTITION     USER    ACCOUNT   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS        NICE
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := Priorities(&b, tc.rows, tc.opts); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestPriorityWeights(t *testing.T) {
	w := api.PriorityWeights{Age: 1000, Fairshare: 10000, QOS: 10000, Partition: 1000, JobSize: 1000, Site: 7}
	tests := map[string]struct {
		noHeader bool
		want     string
	}{
		"with header": {false, `          JOBID PARTITION     USER    ACCOUNT   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS        NICE
        Weights                                                   7       1000      10000       1000       1000      10000
`},
		"without header": {true, `        Weights                                                   7       1000      10000       1000       1000      10000
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := PriorityWeights(&b, w, tc.noHeader); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}
