package ctld

import (
	"fmt"
	"strings"

	"corral/api"
	"corral/ctld/state"
)

// Whether a job's run can live-migrate follows from what the controllers
// already hold: the job's request (--no-migrate, devices), its partition's
// share and its node's runner. The node builds the VM from exactly these
// (noded's share choice is api.Partition.ShareFor), and QEMU's own answer
// for each kind of VM is tested against this rule in noded/vmrun
// (TestMigrationBlockers). Being a function of replicated state, the
// scheduler's migration features can refuse a job with the same reason
// that `corral show job` prints.

// migrationOf returns whether j's run could live-migrate ("yes" or "no")
// and, when not, why, for the job as it is now: n is its node (nil while
// it has none) and p its partition. A pending job nothing in its request
// blocks is "" (not known until it has a node). Ended jobs are "": the
// question is about a run that exists or will.
func migrationOf(j *api.Job, n *api.Node, p api.Partition) (migratable, blocker string) {
	if j.State.Terminal() {
		return "", ""
	}
	var why []string
	if n != nil && n.Runner != "" && n.Runner != "vm" {
		why = append(why, fmt.Sprintf("it runs as processes on node %s (runner %s), not in a VM", n.Name, n.Runner))
	} else {
		why = append(why, vmBlockers(j, p)...)
	}
	switch {
	case len(why) > 0:
		return "no", strings.Join(why, "; ")
	case n == nil:
		return "", ""
	}
	return "yes", ""
}

// vmBlockers lists what keeps QEMU from migrating the VM j runs (or will
// run) in: the fast share, and devices passed through with vfio-pci.
func vmBlockers(j *api.Job, p api.Partition) []string {
	var why []string
	const virtiofs = "its files go over the fast share (virtiofs), whose vhost-user-fs device QEMU 7.2 cannot migrate"
	switch {
	case j.Spec.NoMigrate:
		why = append(why, "it asked for --no-migrate: "+virtiofs)
	case p.ShareFor(false) == api.ShareVirtiofs:
		why = append(why, fmt.Sprintf("its partition %s has share: virtiofs: %s", p.Name, virtiofs))
	}
	if pl := j.Placement; pl != nil && len(pl.GPUs)+len(pl.MIG)+len(pl.VFs) > 0 {
		why = append(why, fmt.Sprintf("it holds %s passed through with vfio-pci, which QEMU cannot migrate", devicesOf(pl)))
	} else if pl == nil && asksForDevices(&j.Spec) {
		why = append(why, "it asks for devices (--gres), passed through with vfio-pci, which QEMU cannot migrate")
	}
	return why
}

// asksForDevices reports whether a job asks for GPUs, MIG slices or VFs.
func asksForDevices(sp *api.JobSpec) bool {
	for _, g := range sp.Gres {
		if g.Count > 0 {
			return true
		}
	}
	return false
}

// devicesOf names a placement's passed-through devices for a reason.
func devicesOf(pl *api.Placement) string {
	var parts []string
	for _, d := range []struct {
		n          int
		one, other string
	}{{len(pl.GPUs), "GPU", "GPUs"}, {len(pl.MIG), "MIG slice", "MIG slices"}, {len(pl.VFs), "SR-IOV VF", "SR-IOV VFs"}} {
		switch {
		case d.n == 1:
			parts = append(parts, "1 "+d.one)
		case d.n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", d.n, d.other))
		}
	}
	return strings.Join(parts, " and ")
}

// migrationFunc returns a function that fills a copy of a job with
// migrationOf's answer, over one read of the nodes and partitions.
func (c *Controller) migrationFunc() func(*api.Job) {
	nodes := map[string]*api.Node{}
	var parts []api.Partition
	c.fsm.Read(func(s *state.State) {
		for name, n := range s.Nodes {
			nodes[name] = &api.Node{NodeInfo: api.NodeInfo{Name: name, Runner: n.Runner}}
		}
		parts = s.PartitionList()
	})
	return func(j *api.Job) {
		j.Migratable, j.MigrationBlocker = migrationOf(j, nodes[j.Node], partitionNamed(parts, j.Spec.Partition))
	}
}

// partitionNamed returns the partition called name (the default one for
// ""), or one of that name with no settings.
func partitionNamed(parts []api.Partition, name string) api.Partition {
	for _, p := range parts {
		if p.Name == name || (name == "" && p.Default) {
			return p
		}
	}
	return api.Partition{Name: name}
}
