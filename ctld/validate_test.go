package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"corral/api"
	"corral/ctld/state"
)

// post sends v as JSON to path and returns the answer.
func post(t *testing.T, base, path string, v any) rawAnswer {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return send(t, req)
}

// refused checks that an answer is a 4xx naming field, with want in it.
func refused(t *testing.T, a rawAnswer, field, want string) {
	t.Helper()
	if a.status < 400 || a.status >= 500 || a.err.Field != field || !strings.Contains(a.err.Error, want) {
		t.Fatalf("got %d field %q: %q; want a 4xx naming %q and saying %q", a.status, a.err.Field, a.err.Error, field, want)
	}
}

// gpuNode is a registered node of partition batch with 8 CPUs on two NUMA
// nodes, 16 GiB, two GPUs, 100 2M hugepages and one VF.
func gpuNode() api.NodeInfo {
	cpus := func(from int) []api.CPU {
		var out []api.CPU
		for i := from; i < from+4; i++ {
			out = append(out, api.CPU{ID: i, Core: i})
		}
		return out
	}
	return api.NodeInfo{Name: "g1", CPUs: 8, MemMB: 16384, Runner: "test", BootID: "b", Partitions: []string{"batch"},
		Inventory: &api.Inventory{
			Topology: &api.Topology{Sockets: 1, Distances: [][]int{{10, 20}, {20, 10}}, Nodes: []api.NUMANode{
				{ID: 0, CPUs: cpus(0), MemMB: 8192, FreeMB: 8192, Hugepages: map[int64]api.Hugepages{2048: {Total: 100, Free: 100}}},
				{ID: 1, CPUs: cpus(4), MemMB: 8192, FreeMB: 8192},
			}},
			GPUs: []api.GPU{{Index: 0, UUID: "GPU-a", Model: "H100", NUMANode: 0}, {Index: 1, UUID: "GPU-b", Model: "H100", NUMANode: 1}},
			PFs:  []api.PF{{Addr: "0000:af:00.0", NUMANode: 1, TotalVFs: 1, VFs: []api.VF{{Addr: "0000:af:00.2", NUMANode: 1}}}},
		}}
}

func jobSpec(edit func(s *api.JobSpec)) api.JobSpec {
	s := api.JobSpec{Name: "j", User: "alice", Script: "#!/bin/sh\ntrue\n", NTasks: 1, CPUsPerTask: 1}
	if edit != nil {
		edit(&s)
	}
	return s
}

// TestSubmitStateChecks submits jobs that only the cluster's state can
// judge: a negative nice from a user other than root, and jobs that no
// node of their partition could ever hold (refused, unless the partition
// queues them).
func TestSubmitStateChecks(t *testing.T) {
	c := startOne(t, HTTPTimeouts{}, func(cfg *Config) {
		cfg.Partitions = []api.Partition{{Name: "batch", Default: true}, {Name: "later", QueueUnfit: true}, {Name: "chemonly", AllowAccounts: []string{"chem"}}}
	})
	base := "http://" + c.HTTPAddr()
	if a := post(t, base, "/v1/nodes/register", gpuNode()); a.status != 200 {
		t.Fatalf("register: %d %q", a.status, a.err.Error)
	}
	for _, rq := range []struct {
		path string
		body any
	}{
		{"/v1/accounts", api.AccountRequest{Account: api.Account{Name: "phys", Shares: 1}}},
		{"/v1/accounts", api.AccountRequest{Account: api.Account{Name: "chem", Shares: 1}}},
		{"/v1/users", api.UserRequest{User: api.AccountUser{Name: "alice", Account: "phys", Shares: 1}}},
	} {
		if a := post(t, base, rq.path, rq.body); a.status != 200 {
			t.Fatalf("%s: %d %q", rq.path, a.status, a.err.Error)
		}
	}
	later := gpuNode()
	later.Name, later.Partitions, later.BootID = "l1", []string{"later"}, "c"
	later.Inventory = nil
	// s1 is batch's only node with scratch space, and a small one.
	scratch := api.NodeInfo{Name: "s1", CPUs: 2, MemMB: 2048, Runner: "test", BootID: "d", Partitions: []string{"batch"}, TmpMB: 4000}
	for _, n := range []api.NodeInfo{later, scratch} {
		if a := post(t, base, "/v1/nodes/register", n); a.status != 200 {
			t.Fatalf("register %s: %d %q", n.Name, a.status, a.err.Error)
		}
	}
	tests := map[string]submitCase{
		"a job that fits":          {edit: func(s *api.JobSpec) { s.CPUsPerTask = 8 }},
		"two GPUs and a VF fit":    {edit: func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Count: 2}, {Name: "vf", Count: 1}} }},
		"root may be negative":     {edit: func(s *api.JobSpec) { s.User, s.Nice = "root", -10 }},
		"negative nice, not root":  {edit: func(s *api.JobSpec) { s.Nice = -10 }, field: "nice", want: "only root may give a negative nice"},
		"root may fix a priority":  {edit: func(s *api.JobSpec) { s.User, s.Priority = "root", 7000 }},
		"all of a node's memory":   {edit: func(s *api.JobSpec) { s.MemAll = true }},
		"scratch space a node has": {edit: func(s *api.JobSpec) { s.TmpMB = 4000 }},
		"more scratch space than any node": {edit: func(s *api.JobSpec) { s.TmpMB = 4001 }, field: "tmp_mb",
			want: "Requested node configuration is not available: the job asks for 4001 MiB of scratch space (--tmp); the largest node of partition batch (s1) has 4000 MiB"},
		"CPUs on one node, scratch space on another": {edit: func(s *api.JobSpec) { s.CPUsPerTask, s.TmpMB = 8, 1000 }, field: "tmp_mb",
			want: "no node of partition batch can hold its CPUs, memory, devices, hugepages and scratch space together (8 CPUs, 4096 MiB, 1000 MiB of scratch space)"},
		"a GPU on one node, scratch space on another": {edit: func(s *api.JobSpec) { s.Gres, s.TmpMB = []api.Gres{{Name: "gpu", Count: 1}}, 1000 }, field: "gres",
			want: "(1 CPUs, 512 MiB, 1 GPUs, 1000 MiB of scratch space)"},
		"--priority, not root": {edit: func(s *api.JobSpec) { s.Priority = 7000 }, field: "priority",
			want: "only operators and administrators may set a job's priority"},
		"--cpus-per-gpu short of CPUs": {edit: func(s *api.JobSpec) { s.Gres, s.CPUsPerGPU = []api.Gres{{Name: "gpu", Count: 2}}, 4 }, field: "cpus_per_gpu",
			want: "--cpus-per-gpu=4 with 2 GPUs needs 8 CPUs; the job asks for 1"},
		"an overcommitting job asks for one task's CPUs": {edit: func(s *api.JobSpec) { s.NTasks, s.CPUsPerTask, s.Overcommit = 64, 2, true }},
		"more CPUs than any node": {edit: func(s *api.JobSpec) { s.NTasks = 16 }, field: "cpus_per_task",
			want: "Requested node configuration is not available: the job asks for 16 CPUs; the largest node of partition batch (g1) has 8"},
		"more memory than any node": {edit: func(s *api.JobSpec) { s.MemPerNode = 32768 }, field: "mem_per_node_mb",
			want: "Requested node configuration is not available: the job asks for 32768 MiB of memory; the largest node of partition batch (g1) offers 16384 MiB"},
		"more GPUs than any node": {edit: func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Count: 3}} }, field: "gres",
			want: "the job asks for 3 GPUs; the nodes of partition batch have at most 2"},
		"more VFs than any node": {edit: func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "vf", Count: 2}} }, field: "gres", want: "2 SR-IOV VFs"},
		"more hugepages than any node": {edit: func(s *api.JobSpec) { s.Hugepages = []api.HugepageRequest{{SizeKB: 2048, Count: 101}} }, field: "hugepages",
			want: "101 hugepages of 2048 KiB; the nodes of partition batch have at most 100"},
		"1G hugepages nobody has":                   {edit: func(s *api.JobSpec) { s.Hugepages = []api.HugepageRequest{{SizeKB: 1 << 20, Count: 1}} }, field: "hugepages", want: "at most 0"},
		"a partition that queues what does not fit": {edit: func(s *api.JobSpec) { s.Partition, s.NTasks = "later", 64 }},
		"a partition that does not exist":           {edit: func(s *api.JobSpec) { s.Partition = "nosuch" }, field: "partition", want: `invalid partition "nosuch" (valid: batch, chemonly, later)`},
		"the poison pill":                           {edit: func(s *api.JobSpec) { s.Gres = []api.Gres{{Name: "gpu", Count: -5}} }, field: "gres", want: "the count must be between 1 and 1000000"},
		"a dependency on no job": {edit: func(s *api.JobSpec) {
			s.Dependency = &api.Dependency{Clauses: []api.DepClause{{Type: "afterok", JobIDs: []string{"999"}}}}
		}, field: "dependency", want: "job 999 does not exist"},
		"an image no node has":   {edit: func(s *api.JobSpec) { s.Image = "centos7" }, field: "image", want: "no node has this image"},
		"Slurm's normal QoS":     {edit: func(s *api.JobSpec) { s.QOS = "normal" }},
		"an account of the user": {edit: func(s *api.JobSpec) { s.Account = "phys" }},
		"an account that does not exist": {edit: func(s *api.JobSpec) { s.Account = "nosuch" }, field: "account",
			want: `Invalid account or account/partition combination specified: account "nosuch" does not exist; user alice's accounts: phys (use -A)`},
		"an account the user is not in": {edit: func(s *api.JobSpec) { s.Account = "chem" }, field: "account",
			want: "Invalid account or account/partition combination specified: user alice is not in account chem"},
		"a user in no account": {edit: func(s *api.JobSpec) { s.User, s.Account = "bob", "phys" }, field: "account",
			want: "user bob is in no account: an administrator adds them with corral user add bob --account NAME"},
		"an account the partition does not take": {edit: func(s *api.JobSpec) { s.Partition, s.Account = "chemonly", "phys" }, field: "account",
			want: `Invalid account or account/partition combination specified: partition chemonly takes jobs of accounts chem only; account "phys" is not one`},
	}
	submitCases(t, base, tests)
}

// submitCase is a job submitted alone: accepted when field is "", else
// refused naming field and saying want.
type submitCase struct {
	edit        func(s *api.JobSpec)
	field, want string
}

// submitCases submits each case's job to base and checks the answer.
func submitCases(t *testing.T, base string, tests map[string]submitCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := post(t, base, "/v1/jobs", api.SubmitRequest{Jobs: []api.JobSpec{jobSpec(tc.edit)}})
			if tc.field == "" {
				if a.status != 200 {
					t.Fatalf("refused: %d %q", a.status, a.err.Error)
				}
				return
			}
			refused(t, a, tc.field, tc.want)
		})
	}
}

// TestArrayWithoutExpressionGetsOne submits an array as ranges only: the
// controller writes its expression, so listings can show it.
func TestArrayWithoutExpressionGetsOne(t *testing.T) {
	c := startOne(t, HTTPTimeouts{})
	cl, _ := api.NewClient("http://" + c.HTTPAddr())
	res, err := cl.Submit(context.Background(), []api.JobSpec{jobSpec(func(s *api.JobSpec) {
		s.Array = &api.ArraySpec{Ranges: []api.ArrayRange{{First: 5, Last: 9, Step: 1}, {First: 0, Last: 6, Step: 1}}, Throttle: 2}
	})})
	if err != nil {
		t.Fatal(err)
	}
	j, err := cl.Job(context.Background(), res[0].JobID, false)
	if err != nil || j.Spec.Array.Raw != "0-9%2" || j.ArrayPending.String() != "0-9" {
		t.Fatalf("array %+v, pending %v (%v); want raw 0-9%%2", j.Spec.Array, j.ArrayPending, err)
	}
}

// TestOtherRequestsAreValidated refuses malformed registrations, status
// reports, drains, cancels, holds and policy changes, each naming the
// field.
func TestOtherRequestsAreValidated(t *testing.T) {
	c := startOne(t, HTTPTimeouts{})
	base := "http://" + c.HTTPAddr()
	if a := post(t, base, "/v1/nodes/register", gpuNode()); a.status != 200 {
		t.Fatalf("register: %d %q", a.status, a.err.Error)
	}
	node := func(edit func(n *api.NodeInfo)) api.NodeInfo {
		n := gpuNode()
		edit(&n)
		return n
	}
	topo := func(n *api.NodeInfo) *api.Topology { return n.Inventory.Topology }
	status := func(r api.JobReport) api.NodeStatus {
		return api.NodeStatus{Name: "g1", BootID: "b", Reports: []api.JobReport{r}}
	}
	done := api.JobReport{JobID: 1, State: api.StateCompleted}
	tests := map[string]struct {
		path        string
		body        any
		field, want string
	}{
		"a node named ../../x":      {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Name = "../../x" }), "name", "must start with a letter, a digit or '_'"},
		"a node named a/b":          {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Name = "a/b" }), "name", "may hold only letters"},
		"a node named a..b":         {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Name = "a..b" }), "name", `must not contain ".."`},
		"a node without a name":     {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Name = "" }), "name", "without a name"},
		"a node with 0 CPUs":        {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.CPUs = 0 }), "cpus", "cpus=0 must be between 1 and 1000000"},
		"an overlay without a port": {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Overlay = "192.0.2.1" }), "overlay", "give the node's IPv4 address and a UDP port"},
		"an overlay on 0.0.0.0":     {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Overlay = "0.0.0.0:4789" }), "overlay", "overlay endpoint"},
		"a node with 2^40 CPUs":     {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.CPUs = 1 << 40 }), "cpus", "between 1 and 1000000"},
		"negative memory":           {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.MemMB = -1 }), "mem_mb", "mem_mb=-1"},
		"negative scratch space":    {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.TmpMB = -1 }), "tmp_mb", "tmp_mb=-1 must be between 0 and"},
		"a partition with a space":  {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Partitions = []string{"a b"} }), "partitions", "may hold only letters"},
		"a partition listed twice":  {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Partitions = []string{"a", "a"} }), "partitions", "listed twice"},
		"an image as a path":        {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Images = []string{"../img"} }), "images", "must start with"},
		"distances not square":      {"/v1/nodes/register", node(func(n *api.NodeInfo) { topo(n).Distances = [][]int{{10, 20}} }), "inventory.topology.distances", "it must be square"},
		"a row too short":           {"/v1/nodes/register", node(func(n *api.NodeInfo) { topo(n).Distances[1] = []int{10} }), "inventory.topology.distances", "row 1"},
		"a zero distance":           {"/v1/nodes/register", node(func(n *api.NodeInfo) { topo(n).Distances[0][1] = 0 }), "inventory.topology.distances", "between 1 and 255"},
		"a NUMA node twice":         {"/v1/nodes/register", node(func(n *api.NodeInfo) { topo(n).Nodes[1].ID = 0 }), "inventory.topology.nodes.id", "NUMA node 0 is listed twice"},
		"a CPU twice":               {"/v1/nodes/register", node(func(n *api.NodeInfo) { topo(n).Nodes[1].CPUs[0].ID = 0 }), "inventory.topology.nodes.cpus.id", "CPU 0 is listed twice"},
		"a negative CPU id":         {"/v1/nodes/register", node(func(n *api.NodeInfo) { topo(n).Nodes[0].CPUs[0].ID = -1 }), "inventory.topology.nodes.cpus.id", "between 0"},
		"negative NUMA memory":      {"/v1/nodes/register", node(func(n *api.NodeInfo) { topo(n).Nodes[0].MemMB = -5 }), "inventory.topology.nodes.mem_mb", "between 0"},
		"negative hugepages":        {"/v1/nodes/register", node(func(n *api.NodeInfo) { topo(n).Nodes[0].Hugepages[2048] = api.Hugepages{Total: -1} }), "inventory.topology.nodes.hugepages.total", "between 0"},
		"a hugepage size of 3 KiB":  {"/v1/nodes/register", node(func(n *api.NodeInfo) { topo(n).Nodes[0].Hugepages[3] = api.Hugepages{} }), "inventory.topology.nodes.hugepages", "not a power of two"},
		"a GPU twice":               {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Inventory.GPUs[1].UUID = "GPU-a" }), "inventory.gpus.uuid", "listed twice"},
		"a GPU without an id":       {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Inventory.GPUs[0].UUID = "" }), "inventory.gpus.uuid", "needs an id"},
		"too many GPUs":             {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Inventory.GPUs = make([]api.GPU, maxGPUs+1) }), "inventory.gpus", "1025 entries"},
		"a GPU on NUMA node -7":     {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Inventory.GPUs[0].NUMANode = -7 }), "inventory.gpus.numa_node", "between -1"},
		"a GPU model with escapes":  {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Inventory.GPUs[0].Model = "\x1b[2J" }), "inventory.gpus.model", "control character"},
		"too many VFs":              {"/v1/nodes/register", node(func(n *api.NodeInfo) { n.Inventory.PFs[0].TotalVFs = 1 << 20 }), "inventory.pfs.total_vfs", "between 0 and 4096"},
		"a report in state RUNNING": {"/v1/nodes/status", status(api.JobReport{JobID: 1, State: api.StateRunning}), "reports.state", "is not a state a run ends in"},
		"a report in state BOGUS":   {"/v1/nodes/status", status(api.JobReport{JobID: 1, State: "BOGUS"}), "reports.state", `"BOGUS"`},
		"exit code 300":             {"/v1/nodes/status", status(api.JobReport{JobID: 1, State: api.StateFailed, ExitCode: 300}), "reports.exit_code", "between 0 and 255"},
		"signal 99":                 {"/v1/nodes/status", status(api.JobReport{JobID: 1, State: api.StateFailed, Signal: 99}), "reports.signal", "between 0 and 64"},
		"a VM started lukewarm":     {"/v1/nodes/status", status(api.JobReport{JobID: 1, State: api.StateFailed, VMStart: "lukewarm"}), "reports.vm_start", "use warm, cold"},
		"a 1 MB message":            {"/v1/nodes/status", status(api.JobReport{JobID: 1, State: api.StateFailed, Message: strings.Repeat("m", 1<<20)}), "reports.message", "the most is 4096"},
		"a report on job 0":         {"/v1/nodes/status", status(api.JobReport{State: api.StateFailed}), "reports.job_id", "job 0"},
		"too many reports":          {"/v1/nodes/status", api.NodeStatus{Name: "g1", BootID: "b", Reports: make([]api.JobReport, maxReports+1)}, "reports", "10001 entries"},
		"a heartbeat from ../x":     {"/v1/nodes/heartbeat", api.NodeStatus{Name: "../x"}, "name", "must start with"},
		"a report of a known job":   {"/v1/nodes/status", status(done), "", "stale report is fine"},
		"a drain of ../x":           {"/v1/nodes/drain", api.DrainRequest{Node: "../x", Drain: true, Reason: "r"}, "node", "must start with"},
		"a drain reason with ESC":   {"/v1/nodes/drain", api.DrainRequest{Node: "g1", Drain: true, Reason: "\x1b]2;x\x07"}, "reason", "control character"},
		"a cancel of SLEEPING jobs": {"/v1/jobs/cancel", api.CancelRequest{Filter: api.JobFilter{States: []api.JobState{"SLEEPING"}}}, "states", `unknown job state "SLEEPING"`},
		"a cancel of job 0":         {"/v1/jobs/cancel", api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{0}}}, "ids", "job id 0"},
		"a cancel of 100001 jobs":   {"/v1/jobs/cancel", api.CancelRequest{Filter: api.JobFilter{IDs: make([]uint64, maxIDs+1)}}, "ids", "100001 entries"},
		"a cancel by a long user":   {"/v1/jobs/cancel", api.CancelRequest{Filter: api.JobFilter{Users: []string{strings.Repeat("u", 300)}}}, "users", "the most is 256"},
		"a cancel of task -1":       {"/v1/jobs/cancel", api.CancelRequest{Filter: api.JobFilter{Tasks: []api.TaskRef{{Array: 1, Task: -1}}}}, "tasks", "tasks are 0 to"},
		"a hold of job 0":           {"/v1/jobs/hold", api.HoldRequest{IDs: []uint64{0}, Hold: true}, "ids", "job id 0"},
		"a suspend of job 0":        {"/v1/jobs/suspend", api.SuspendRequest{IDs: []uint64{0}}, "ids", "job id 0"},
		"a QoS named ../q":          {"/v1/qos", api.QOSRequest{QOS: api.QOS{Name: "../q"}}, "name", "must start with"},
		"a QoS priority of -1":      {"/v1/qos", api.QOSRequest{QOS: api.QOS{Name: "q", Priority: -1}}, "priority", "between 0 and 4294967295"},
		"a QoS preempt mode kill":   {"/v1/qos", api.QOSRequest{QOS: api.QOS{Name: "q", PreemptMode: "kill"}}, "preempt_mode", "use cancel, requeue, suspend, migrate or checkpoint"},
		"a QoS falling back to migrate": {"/v1/qos", api.QOSRequest{QOS: api.QOS{Name: "q", PreemptMode: "migrate", PreemptFallback: "migrate"}},
			"preempt_fallback", "migrate cannot be its own fallback"},
		"a QoS MaxWall of 2^62":    {"/v1/qos", api.QOSRequest{QOS: api.QOS{Name: "q", MaxWall: 1 << 62}}, "max_wall_s", "between 0 and"},
		"an account named a b":     {"/v1/accounts", api.AccountRequest{Account: api.Account{Name: "a b"}}, "name", "may hold only letters"},
		"negative account shares":  {"/v1/accounts", api.AccountRequest{Account: api.Account{Name: "a", Shares: -1}}, "shares", "from 0 to"},
		"a user named a b":         {"/v1/users", api.UserRequest{User: api.AccountUser{Name: "a b", Account: "x"}}, "name", "without spaces"},
		"shares of 1e300":          {"/v1/users", api.UserRequest{User: api.AccountUser{Name: "u", Account: "x", Shares: 1e300}}, "shares", "from 0 to"},
		"an unknown setting":       {"/v1/config", api.ConfigRequest{Settings: [][2]string{{"Frobnicate", "1"}}}, "", `unknown setting "Frobnicate"`},
		"a weight of 2^40":         {"/v1/config", api.ConfigRequest{Settings: [][2]string{{"PriorityWeightAge", "1099511627776"}}}, "", "from 0 to 4294967295"},
		"a billing weight of NaN":  {"/v1/config", api.ConfigRequest{Settings: [][2]string{{"BillingWeightCPU", "NaN"}}}, "", "is not a number"},
		"a half-life of 103 years": {"/v1/config", api.ConfigRequest{Settings: [][2]string{{"PriorityDecayHalfLife", "900000h"}}}, "", "more than 100 years"},
		"an update to afterwards":  {"/v1/jobs/update", api.UpdateJobRequest{ID: 1, Dependency: &api.Dependency{Clauses: []api.DepClause{{Type: "afterwards", JobIDs: []string{"1"}}}}}, "dependency", `unknown dependency type "afterwards"`},
		"a member named ../m":      {"/v1/internal/members", state.SetMember{ID: "../m", HTTPAddr: "h:1"}, "id", "must start with"},
		"a joining member ../m":    {"/v1/internal/members/join", memberJoin{ID: "../m", RaftAddr: "h:1"}, "id", "must start with"},
		"a joining member at h":    {"/v1/internal/members/join", memberJoin{ID: "c9", RaftAddr: "h"}, "raft_addr", "must be HOST:PORT"},
		"a joining member at h:0":  {"/v1/internal/members/join", memberJoin{ID: "c9", RaftAddr: "h:0"}, "raft_addr", "must be HOST:PORT"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := post(t, base, tc.path, tc.body)
			if tc.field == "" && strings.HasSuffix(tc.want, "is fine") {
				if a.status != 200 {
					t.Fatalf("refused: %d %q", a.status, a.err.Error)
				}
				return
			}
			refused(t, a, tc.field, tc.want)
		})
	}
}

// TestMaxSubmitPerUserInOneRequest submits one request of five jobs for a
// user whose QoS allows two pending or running: the request is refused at
// its third job, with the user's count and the limit, and no job is
// created; a request of two is taken, and one more refused.
func TestMaxSubmitPerUserInOneRequest(t *testing.T) {
	c := startOne(t, HTTPTimeouts{})
	base := "http://" + c.HTTPAddr()
	cl, _ := api.NewClient(base)
	ctx := context.Background()
	if err := cl.PutQOS(ctx, api.QOSRequest{QOS: api.QOS{Name: "two", MaxSubmitPerUser: 2}}); err != nil {
		t.Fatal(err)
	}
	five := make([]api.JobSpec, 5)
	for i := range five {
		five[i] = jobSpec(func(s *api.JobSpec) { s.QOS = "two" })
	}
	a := post(t, base, "/v1/jobs", api.SubmitRequest{Jobs: five})
	refused(t, a, "qos", "job 3 of the batch: QOSMaxSubmitJobPerUserLimit: user alice already has 2 jobs pending or running in QoS two, its limit is 2")
	jobs, err := cl.Jobs(ctx, api.JobFilter{}, true)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("%d jobs after the refused request (%v), want none", len(jobs), err)
	}
	if _, err := cl.Submit(ctx, five[:2]); err != nil {
		t.Fatalf("two jobs refused: %v", err)
	}
	refused(t, post(t, base, "/v1/jobs", api.SubmitRequest{Jobs: five[:1]}), "qos", "user alice already has 2 jobs")
}
