package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestPartitionCommandsAgainstController adds, changes, shows and deletes
// partitions with corral partition and scontrol, and checks that a DRAIN
// partition refuses new jobs and an UP one takes them again.
func TestPartitionCommandsAgainstController(t *testing.T) {
	addr := startController(t, []api.Partition{{Name: "batch", Default: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := &ctlFixture{ctx: ctx, addr: addr}
	mustRun(t, ctx, addr, "corral", "partition", "add", "debug", "MaxTime=30:00", "AllowAccounts=phys,bio", "PriorityTier=2")
	mustFail(t, f, []string{"partition add debug", "exists already"}, "corral", "partition", "add", "debug")
	mustFail(t, f, []string{`unknown partition setting "Colour"`}, "corral", "partition", "modify", "debug", "Colour=blue")
	mustFail(t, f, []string{"no such partition"}, "corral", "partition", "modify", "nowhere", "State=DOWN")
	mustRun(t, ctx, addr, "scontrol", "update", "PartitionName=batch", "State=DRAIN")
	show := mustRun(t, ctx, addr, "scontrol", "show", "partition")
	for _, want := range []string{"PartitionName=batch", "State=DRAIN", "PartitionName=debug", "MaxTime=00:30:00", "AllowAccounts=phys,bio", "PriorityTier=2 OverSubscribe=NO", "Default=YES"} {
		if !strings.Contains(show, want) {
			t.Errorf("scontrol show partition does not hold %q:\n%s", want, show)
		}
	}
	if one := mustRun(t, ctx, addr, "corral", "partition", "list", "debug"); strings.Contains(one, "PartitionName=batch") {
		t.Errorf("partition list debug shows batch too:\n%s", one)
	}
	mustFail(t, f, []string{"partition batch is DRAIN: it takes no new jobs"}, "sbatch", "--wrap", "true")
	mustRun(t, ctx, addr, "corral", "partition", "modify", "batch", "State=UP")
	mustRun(t, ctx, addr, "sbatch", "--wrap", "true")
	mustFail(t, f, []string{"job", "pending or running in it"}, "corral", "partition", "delete", "batch")
	// What the partition's VMs see is replicated with it too: the node
	// daemons read it from GET /v1/partitions.
	mustRun(t, ctx, addr, "corral", "partition", "modify", "debug", "SharedPaths=/home,/scratch", "Share=virtiofs")
	mustFail(t, f, []string{"partition debug", `shared path "scratch"`}, "corral", "partition", "modify", "debug", "SharedPaths=scratch")
	mustFail(t, f, []string{`share "9p": use nfs`}, "corral", "partition", "modify", "debug", "Share=9p")
	if show := mustRun(t, ctx, addr, "scontrol", "show", "partition", "debug"); !strings.Contains(show, "SharedPaths=/home,/scratch") || !strings.Contains(show, "Share=virtiofs") || !strings.Contains(show, "Network=none") || !strings.Contains(show, "Warm=yes") {
		t.Errorf("scontrol show partition debug lacks the share settings:\n%s", show)
	}
	mustRun(t, ctx, addr, "corral", "partition", "modify", "debug", "Warm=NO")
	mustFail(t, f, []string{`warm "lukewarm": use yes`}, "corral", "partition", "modify", "debug", "Warm=lukewarm")
	if show := mustRun(t, ctx, addr, "scontrol", "show", "partition", "debug"); !strings.Contains(show, "Warm=no") {
		t.Errorf("scontrol show partition debug does not say Warm=no:\n%s", show)
	}
	cl, _ := api.NewClient(addr)
	parts, err := cl.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.Name == "debug" && (p.Share != "virtiofs" || len(p.SharedPaths) != 2 || p.Warm != api.WarmNo) {
			t.Errorf("GET /v1/partitions gives debug %+v, want its share settings", p)
		}
	}
	mustRun(t, ctx, addr, "corral", "partition", "delete", "debug")
	if show := mustRun(t, ctx, addr, "corral", "show", "partition"); strings.Contains(show, "debug") {
		t.Errorf("debug is still shown after its deletion:\n%s", show)
	}
}
