package ctld

import (
	"strings"
	"testing"

	"corral/api"
)

// TestMigrationOf checks whether a job's run is said to migrate, and why
// not, from its request, its partition's share and its node's runner.
func TestMigrationOf(t *testing.T) {
	vm := &api.Node{NodeInfo: api.NodeInfo{Name: "n1", Runner: "vm"}}
	proc := &api.Node{NodeInfo: api.NodeInfo{Name: "p1", Runner: "process"}}
	batch := api.Partition{Name: "batch"}
	fast := api.Partition{Name: "fast", Share: api.ShareVirtiofs}
	running := func(mod func(*api.Job)) *api.Job {
		j := &api.Job{ID: 1, State: api.StateRunning, Node: "n1"}
		if mod != nil {
			mod(j)
		}
		return j
	}
	cases := map[string]struct {
		job       *api.Job
		node      *api.Node
		part      api.Partition
		want      string
		blockerIn []string // each must be in the blocker
	}{
		"the default VM, over NFS":          {job: running(nil), node: vm, part: batch, want: "yes"},
		"--no-migrate":                      {job: running(func(j *api.Job) { j.Spec.NoMigrate = true }), node: vm, part: batch, want: "no", blockerIn: []string{"--no-migrate", "virtiofs", "vhost-user-fs"}},
		"a partition of virtiofs":           {job: running(nil), node: vm, part: fast, want: "no", blockerIn: []string{"partition fast has share: virtiofs", "vhost-user-fs"}},
		"a suspended job is asked the same": {job: running(func(j *api.Job) { j.State = api.StateSuspended; j.Spec.NoMigrate = true }), node: vm, part: batch, want: "no", blockerIn: []string{"--no-migrate"}},
		"GPUs and a VF passed through": {job: running(func(j *api.Job) {
			j.Placement = &api.Placement{GPUs: []string{"GPU-a", "GPU-b"}, VFs: []string{"0000:3b:02.0"}}
		}), node: vm, part: batch, want: "no", blockerIn: []string{"2 GPUs and 1 SR-IOV VF", "vfio-pci"}},
		"both the share and the devices": {job: running(func(j *api.Job) {
			j.Spec.NoMigrate = true
			j.Placement = &api.Placement{MIG: []string{"MIG-a"}}
		}), node: vm, part: batch, want: "no", blockerIn: []string{"--no-migrate", "; it holds 1 MIG slice"}},
		"the process runner":                            {job: running(nil), node: proc, part: batch, want: "no", blockerIn: []string{"runs as processes on node p1", "not in a VM"}},
		"a pending job nothing blocks is not known yet": {job: &api.Job{State: api.StatePending}, part: batch, want: ""},
		"a pending --no-migrate job is known already":   {job: &api.Job{State: api.StatePending, Spec: api.JobSpec{NoMigrate: true}}, part: batch, want: "no", blockerIn: []string{"--no-migrate"}},
		"a pending job asking for GPUs": {job: &api.Job{State: api.StatePending, Spec: api.JobSpec{Gres: []api.Gres{{Name: "gpu", Count: 1}}}},
			part: batch, want: "no", blockerIn: []string{"--gres", "vfio-pci"}},
		"an ended job is not asked": {job: running(func(j *api.Job) { j.State = api.StateCompleted; j.Spec.NoMigrate = true }), node: vm, part: batch, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, blocker := migrationOf(tc.job, tc.node, tc.part)
			if got != tc.want {
				t.Fatalf("migratable = %q (%s), want %q", got, blocker, tc.want)
			}
			if (blocker != "") != (got == "no") {
				t.Errorf("migratable %q with blocker %q: a blocker goes with no, and only with no", got, blocker)
			}
			for _, w := range tc.blockerIn {
				if !strings.Contains(blocker, w) {
					t.Errorf("blocker %q lacks %q", blocker, w)
				}
			}
		})
	}
}
