package main

import (
	"strings"
	"testing"

	"corral/api"
)

// testNodeFeatures reports node n1's features through its registration,
// replaces them as an operator (corral and scontrol forms), shows them in
// sinfo and scontrol show node, refuses bad ones, and gives them back to
// the node's report.
func testNodeFeatures(t *testing.T, f *ctlFixture) {
	ctx, addr := f.ctx, f.addr
	if err := f.cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 1024, Partitions: []string{"batch"}, Runner: "test", BootID: "b1",
		Features: []string{"intel", "ib"}}); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, ctx, addr, "sinfo", "-h", "-N", "-o", "%N %f %b"); out != "n1 ib,intel ib,intel\n" {
		t.Errorf("sinfo of the reported features: %q", out)
	}
	mustRun(t, ctx, addr, "scontrol", "update", "NodeName=n1", "Features=gpu,amd")
	out := mustRun(t, ctx, addr, "scontrol", "show", "node", "n1")
	for _, want := range []string{"AvailableFeatures=amd,gpu", "ActiveFeatures=amd,gpu FeaturesSetBy=tester ReportedFeatures=ib,intel"} {
		if !strings.Contains(out, want) {
			t.Errorf("show node after an update lacks %q:\n%s", want, out)
		}
	}
	// A restarted daemon reports its own again: the operator's stay.
	if err := f.cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 1024, Partitions: []string{"batch"}, Runner: "test", BootID: "b1",
		Features: []string{"intel"}}); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, ctx, addr, "sinfo", "-h", "-N", "-o", "%f"); out != "amd,gpu\n" {
		t.Errorf("sinfo after the daemon registered again: %q, want the operator's features", out)
	}
	refusals := map[string]struct {
		argv []string
		want string
	}{
		"a bad name":     {[]string{"corral", "node", "update", "n1", "Features=a b"}, `feature "a b" may hold only letters`},
		"no such node":   {[]string{"corral", "node", "update", "n9", "Features=x"}, "node n9: no such node"},
		"an unknown key": {[]string{"scontrol", "update", "NodeName=n1", "Weight=3"}, "Weight is not a node field update can change"},
		"nothing to do":  {[]string{"corral", "node", "update", "n1"}, "give Features=a,b"},
	}
	for name, tc := range refusals {
		r := runCLI(t, ctx, addr, tc.argv...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: %v exited %d, stderr %q; want a refusal saying %q", name, tc.argv, r.code, r.stderr, tc.want)
		}
	}
	mustRun(t, ctx, addr, "corral", "node", "update", "n1", "Features=")
	if out := mustRun(t, ctx, addr, "sinfo", "-h", "-N", "-o", "%f"); out != "(null)\n" {
		t.Errorf("sinfo after Features=: %q, want none", out)
	}
	mustRun(t, ctx, addr, "corral", "node", "update", "n1", "--reset-features")
	if out := mustRun(t, ctx, addr, "sinfo", "-h", "-N", "-o", "%f"); out != "intel\n" {
		t.Errorf("sinfo after --reset-features: %q, want the daemon's", out)
	}
}

func TestShowHostnames(t *testing.T) {
	r := runCLI(t, t.Context(), "", "scontrol", "show", "hostnames", "n[1-3],gpu[01-02]")
	if r.code != 0 || r.stdout != "n1\nn2\nn3\ngpu01\ngpu02\n" {
		t.Errorf("show hostnames: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, t.Context(), "", "corral", "show", "hostlist", "n3,n1", "n2", "gpu02,gpu01")
	if r.code != 0 || r.stdout != "gpu[01-02],n[1-3]\n" {
		t.Errorf("show hostlist: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, t.Context(), "", "scontrol", "show", "hostnames", "n[0-99999999999]")
	if r.code == 0 || !strings.Contains(r.stderr, "more than 1048576 names") {
		t.Errorf("show hostnames of a huge list: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, t.Context(), "", "scontrol", "show", "hostnames")
	if r.code == 0 || !strings.Contains(r.stderr, "SLURM_JOB_NODELIST") {
		t.Errorf("show hostnames without a list: exit %d, stderr %q", r.code, r.stderr)
	}
}
