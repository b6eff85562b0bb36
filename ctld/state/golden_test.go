package state

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// The golden log pins the encoding of every command type. testdata/
// golden.log holds entries as this build's encoder wrote them when they
// were added — one per line, "TYPE NAME JSON" — and testdata/golden.hashes
// the state hash after each. TestGoldenLog decodes the committed bytes,
// applies them and compares every hash, and encodes goldenCommands again
// and compares the bytes: a renamed JSON field, a changed type, a snapshot
// record that encodes differently, or an apply that now does something else
// with an old entry all fail it. TestGoldenLogCoversEveryField checks that
// every field of every payload, down to the leaves, is set in some entry,
// so no field escapes. A deliberate change (a new command, a new field, a
// new snapshot format) is recorded with
//
//	go test ./ctld/state -run Golden -update
//
// and the diff of the two files shows what changed. Entries are only ever
// appended to goldenCommands; an entry that already exists is never edited.

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden.log and testdata/golden.hashes from goldenCommands")

const (
	goldenLog    = "testdata/golden.log"
	goldenHashes = "testdata/golden.hashes"
)

// goldenInventory is a node with every inventory field set.
func goldenInventory() *api.Inventory {
	return &api.Inventory{
		Topology: &api.Topology{Sockets: 2, Distances: [][]int{{10, 21}, {21, 10}}, Nodes: []api.NUMANode{
			{ID: 0, MemMB: 4096, FreeMB: 4000, CPUs: []api.CPU{{ID: 0, Core: 0, Socket: 0, Siblings: []int{2}}, {ID: 2, Core: 0, Socket: 0, Siblings: []int{0}}}},
			{ID: 1, MemMB: 4096, FreeMB: 4000, CPUs: []api.CPU{{ID: 1, Core: 1, Socket: 1, Siblings: []int{3}}, {ID: 3, Core: 1, Socket: 1, Siblings: []int{1}}},
				Hugepages: map[int64]api.Hugepages{2048: {Total: 64, Free: 64}}},
		}},
		GPUs: []api.GPU{
			{Index: 0, UUID: "GPU-aaaa", Model: "H100", MemMB: 81920, PCIBusID: "0000:17:00.0", NUMANode: 0, CPUAffinity: []int{0, 2}},
			{Index: 1, UUID: "GPU-bbbb", Model: "A100", MemMB: 40960, PCIBusID: "0000:65:00.0", NUMANode: 1, MIGEnabled: true,
				MIG: []api.MIGInstance{{UUID: "MIG-cccc", Profile: "1g.10gb", MemMB: 10240}}},
		},
		PFs: []api.PF{{Addr: "0000:3b:00.0", Driver: "mlx5_core", NUMANode: 1, TotalVFs: 2,
			VFs: []api.VF{{Addr: "0000:3b:00.2", Driver: "vfio-pci", IOMMUGroup: 40, NUMANode: 1}}}},
	}
}

// goldenSpec is a request with every field set.
func goldenSpec() JobSpec {
	return JobSpec{
		RequestID: "golden-1", Name: "full", User: "alice", Account: "phys", Partition: "batch", QOS: "high",
		InlineScript: &InlineScript{Script: "#!/bin/sh\necho golden\n"}, Args: []string{"a", "b"}, SubmitDir: "/home/alice", WorkDir: "/home/alice/w",
		InlineEnv: &InlineEnv{Env: []string{"A=1", "PATH=/bin"}}, NTasks: 1, CPUsPerTask: 2, Nodes: 1, MemPerNode: 512, MemPerCPU: 256,
		TimeLimit: 3600, Output: "out-%j.log", Error: "err-%j.log", Requeue: true, Hold: true, KillOnInvalidDep: true,
		Begin: t0.Add(-time.Hour), Comment: "every field", Nice: 5,
		Gres: []api.Gres{{Name: "gpu", Type: "h100", Count: 1}}, Hugepages: []api.HugepageRequest{{SizeKB: 2048, Count: 8}},
		NUMA: api.NUMAStrict, Image: "default",
		Dependency: &Dependency{Any: true, Raw: "after:1+5?afterok:1_0", Clauses: []DepClause{
			{Type: "after", JobIDs: []string{"1"}, Minutes: 5}, {Type: "afterok", JobIDs: []string{"1_0"}}}},
		Array: &api.ArraySpec{Raw: "1-7:2%2", Ranges: []api.ArrayRange{{First: 1, Last: 7, Step: 2}}, Throttle: 2},
	}
}

// goldenCommands is the golden log's content. Append only.
func goldenCommands() []struct {
	t CommandType
	p any
} {
	inv := goldenInventory()
	node := api.NodeInfo{Name: "g1", CPUs: 4, MemMB: 8192, Partitions: []string{"batch"}, Runner: "vm", BootID: "boot-1",
		Version: "v1", Images: []string{"default"}, Inventory: inv, Accel: "kvm", OverheadMB: 64}
	plain := api.NodeInfo{Name: "p1", CPUs: 2, MemMB: 4096, Runner: "process", BootID: "boot-p"}
	restart := node
	restart.BootID, restart.Running = "boot-2", []uint64{2}
	restart.Reports = []api.JobReport{{Alloc: 2, JobID: 4, StartIndex: 9, State: api.StateFailed, ExitCode: 3, Signal: 9, Message: "killed"}}
	simple := func(name string) JobSpec {
		return JobSpec{Name: name, User: "alice", InlineScript: &InlineScript{Script: "#!/bin/sh\ntrue\n"}, NTasks: 1, CPUsPerTask: 1, RequestID: "g-" + name}
	}
	placement := &api.Placement{CPUs: []int{1, 3}, NUMANodes: []int{1}, Mem: []api.NodeAmount{{Node: 1, MB: 512}},
		Hugepages: []api.HugepageAmount{{Node: 1, SizeKB: 2048, Count: 8}}, GPUs: []string{"GPU-aaaa"},
		MIG: []string{"MIG-cccc"}, VFs: []string{"0000:3b:00.2"}, Score: 100}
	cmds := []struct {
		t CommandType
		p any
	}{
		{CmdSetMember, &SetMember{ID: "c1", HTTPAddr: "127.0.0.1:7001"}},
		{CmdPutQOS, &PutQOS{QOS: api.QOS{Name: "high", Priority: 100, Preempt: []string{"besteffort"}, PreemptMode: api.PreemptSuspend,
			PreemptExemptTime: 60, MaxWall: 7200, MaxJobsPerUser: 10, MaxSubmitPerUser: 20, GrpCPUs: 64}}},
		{CmdPutAccount, &PutAccount{Account: api.Account{Name: "phys", Parent: "root", Shares: 2}}},
		{CmdPutUser, &PutUser{User: api.AccountUser{Name: "alice", Account: "phys", Shares: 3}}},
		{CmdSetConfig, &SetConfig{Settings: [][2]string{{"PriorityWeightAge", "2000"}, {"MinJobAge", "60"}}}},
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: node}},
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: plain}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{simple("a"), goldenSpec(), simple("c"), simple("d")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Second), Starts: []PlanStart{
			{JobID: 1, Node: "g1", CPUs: 2, MemMB: 512, OverheadMB: 64, Placement: placement},
			{JobID: 4, Node: "g1", CPUs: 1, MemMB: 256, OverheadMB: 64},
			{JobID: 3, Node: "p1", CPUs: 1, MemMB: 256},
			{JobID: 2, Node: "p1", CPUs: 2, MemMB: 512, Array: true, Task: 3, NewID: 5},
		}, Reasons: []PlanReason{{JobID: 2, Reason: api.ReasonInvalidJob, Start: t0.Add(time.Hour), Message: "held for the test"}}}},
		{CmdNodeHeartbeats, &NodeHeartbeats{Seen: map[string]time.Time{"g1": t0.Add(2 * time.Second)}}},
		{CmdSuspendJobs, &SuspendJobs{Now: t0.Add(3 * time.Second), IDs: []uint64{4}, Suspend: true, Preempt: true, By: 3}},
		{CmdHoldRelease, &HoldRelease{Now: t0.Add(3 * time.Second), IDs: []uint64{2}, Hold: false}},
		{CmdHoldRelease, &HoldRelease{Now: t0.Add(3 * time.Second), IDs: []uint64{2}, Hold: true}},
		{CmdUpdateJob, &UpdateJob{Now: t0.Add(4 * time.Second), ID: 2, Dependency: &Dependency{Raw: "afterany:3",
			Clauses: []DepClause{{Type: "afterany", JobIDs: []string{"3"}}}}}},
		{CmdJobReports, &JobReports{Now: t0.Add(5 * time.Second), Node: "p1", BootID: "boot-p", Reports: []api.JobReport{
			{Alloc: 3, JobID: 3, StartIndex: 9, State: api.StateCompleted}}}},
		{CmdCancelJobs, &CancelJobs{Now: t0.Add(6 * time.Second), IDs: []uint64{1}, By: "job 9", Preempt: api.PreemptRequeue,
			Tasks: []api.TaskRef{{Array: 2, Task: 5}}}},
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(7 * time.Second), Info: restart}},
		{CmdNodeDrain, &NodeDrain{Now: t0.Add(8 * time.Second), Node: "p1", Drain: true, Reason: "maintenance"}},
		{CmdNodeDown, &NodeDown{Now: t0.Add(9 * time.Second), Nodes: []string{"p1"}, Reason: "Not responding"}},
		{CmdPurgeJobs, &PurgeJobs{Now: t0.Add(time.Hour), Max: 100}},
		{CmdPutQOS, &PutQOS{QOS: api.QOS{Name: "burstable"}, Delete: true}},
		{CmdPutUser, &PutUser{User: api.AccountUser{Name: "alice", Account: "phys"}, Delete: true}},
		{CmdPutAccount, &PutAccount{Account: api.Account{Name: "phys"}, Delete: true}},
		// One pass as one entry: preemptions in every mode, a resume, a
		// cancel, a start, a reservation and a migration.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(2 * time.Hour), Info: api.NodeInfo{Name: "m1", CPUs: 4, MemMB: 4096, Runner: "process", BootID: "boot-m"}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(2 * time.Hour), FirstID: 20, Jobs: []JobSpec{simple("v1"), simple("v2"), simple("v3"), simple("pre"), simple("dep"), simple("wait")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(2*time.Hour + time.Second), Starts: []PlanStart{
			{JobID: 20, Node: "m1", CPUs: 1, MemMB: 256}, {JobID: 21, Node: "m1", CPUs: 1, MemMB: 256}, {JobID: 22, Node: "m1", CPUs: 1, MemMB: 256}}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(2*time.Hour + 2*time.Second),
			Cancels: []PlanCancel{{JobID: 24, Reason: "the scheduler: its dependency can never be satisfied (--kill-on-invalid-dep=yes)"}},
			Stops: []PlanStop{{JobID: 20, Mode: api.PreemptCancel, By: 23}, {JobID: 21, Mode: api.PreemptRequeue, By: 23},
				{JobID: 22, Mode: api.PreemptSuspend, By: 23}},
			Resumes:    []uint64{22},
			Starts:     []PlanStart{{JobID: 23, Node: "m1", CPUs: 1, MemMB: 256}},
			Reasons:    []PlanReason{{JobID: 25, Reason: api.ReasonResources, Start: t0.Add(3 * time.Hour), Node: "m1"}},
			Migrations: []PlanMigration{{JobID: 23, From: "m1", To: "g1"}},
		}},
		// Replicated cluster configuration.
		{CmdSeedConfig, &SeedConfig{Partitions: []api.Partition{{Name: "batch", Default: true, MaxTime: 86400}}, DefMemPerCPU: 1024, Policy: "conservative"}},
		{CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "gpu", Default: true, State: api.PartitionDrain, MaxTime: 7200,
			DefaultTime: 3600, Nodes: []string{"g1"}, QueueUnfit: true, AllowAccounts: []string{"phys"}, DenyAccounts: []string{"bio"},
			AllowQos: []string{"high"}, PriorityTier: 2, PreemptMode: api.PreemptRequeue, MaxNodes: 4, MinNodes: 1}}},
		{CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "gpu"}, Delete: true}},
		// Dependencies as typed targets, resolved once at submit: a job,
		// one task of an array and a whole array.
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(3 * time.Hour), FirstID: 30, Jobs: []JobSpec{func() JobSpec {
			sp := simple("typed")
			sp.Dependency = &Dependency{Raw: "afterok:25:2_5,afterany:2", Clauses: []DepClause{
				{Type: "afterok", Targets: []DepTarget{{Kind: DepJob, Job: 25}, {Kind: DepTask, Job: 2, Task: 5}}},
				{Type: "afterany", Targets: []DepTarget{{Kind: DepArray, Job: 2}}}}}
			return sp
		}()}}},
		// What the job I/O, VM share and usage work added: a node's job
		// API, a job's warning signal and --no-migrate, a run's measured
		// usage, a partition's share settings.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(4 * time.Hour), Info: api.NodeInfo{Name: "io1", CPUs: 2, MemMB: 2048,
			Runner: "vm", BootID: "boot-io", APIAddr: "http://127.0.0.1:7101"}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(4 * time.Hour), FirstID: 40, Jobs: []JobSpec{func() JobSpec {
			sp := simple("io")
			sp.Signal, sp.NoMigrate = &api.WarnSignal{Signal: 10, BeforeS: 60, Batch: true}, true
			return sp
		}()}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(4*time.Hour + time.Second), Starts: []PlanStart{{JobID: 40, Node: "io1", CPUs: 1, MemMB: 256}}}},
		{CmdJobReports, &JobReports{Now: t0.Add(4*time.Hour + time.Minute), Node: "io1", BootID: "boot-io", Reports: []api.JobReport{
			{JobID: 40, StartIndex: 34, State: api.StateCompleted, CPUSeconds: 12.5, PeakMemKB: 40960}}}},
		{CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "vm", SharedPaths: []string{"/home", "/scratch"},
			Share: "virtiofs", Network: "none"}}},
		{CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "site", Share: "nfs", Root: "/srv/roots/el9"}}},
		// Scripts and environments out of line: the entry carries what it
		// introduces, and the second job names the first's by key.
		func() struct {
			t CommandType
			p any
		} {
			first := Inline(simple("blob-a"), "#!/bin/sh\necho out of line\n", []string{"HOME=/home/alice", "SAMPLE=1"})
			blobs := OutOfLine(&first)
			second := simple("blob-b")
			second.InlineScript, second.Script, second.Env = nil, first.Script, first.Env
			return struct {
				t CommandType
				p any
			}{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(5 * time.Hour), FirstID: 50, Jobs: []JobSpec{first, second}, Blobs: blobs}}
		}(),
		// Tokens and roles: a coordinator's narrowed token, renewed, a
		// service token revoked, and a coordinator's grant.
		{CmdPutAccount, &PutAccount{Account: api.Account{Name: "chem", Parent: "root", Shares: 1}}},
		{CmdPutToken, &PutToken{Now: t0.Add(6 * time.Hour), Token: TokenRecord{Hash: HashSecret("s1"), Token: api.Token{
			ID: "tok1", User: "carol", Role: api.RoleCoordinator, Account: "chem", Ops: []api.Op{api.OpRead, api.OpCancel},
			Description: "ci", CreatedBy: "root", Created: t0.Add(6 * time.Hour), Expires: t0.Add(30 * time.Hour),
			Revoked: t0.Add(7 * time.Hour)}}}},
		{CmdPutToken, &PutToken{Now: t0.Add(7 * time.Hour), Renew: true, Token: TokenRecord{Token: api.Token{ID: "tok1", User: "carol",
			Expires: t0.Add(60 * time.Hour)}}}},
		{CmdPutToken, &PutToken{Now: t0.Add(7 * time.Hour), Token: TokenRecord{Hash: HashSecret("s2"), Token: api.Token{
			ID: "tok2", User: "svc", Role: api.RoleUser, CreatedBy: "root", Created: t0.Add(7 * time.Hour), Expires: t0.Add(8 * time.Hour)}}}},
		{CmdRevokeToken, &RevokeToken{Now: t0.Add(7*time.Hour + time.Minute), ID: "tok2", By: "root"}},
		{CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "carol", Role: api.RoleCoordinator, Accounts: []string{"chem"}}}},
		{CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "dave", Role: api.RoleOperator}}},
		{CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "dave"}, Delete: true}},
		// Audit records in two chains, one refused request among them.
		{CmdAuditRecords, goldenAudit()},
		// A node whose runner still probes the host takes no new job: the
		// start is rejected.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(8 * time.Hour), Info: api.NodeInfo{Name: "pr1", CPUs: 2, MemMB: 2048,
			Runner: "vm", BootID: "boot-pr", Probing: true}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(8 * time.Hour), FirstID: 60, Jobs: []JobSpec{simple("probing")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(8*time.Hour + time.Second), Starts: []PlanStart{{JobID: 60, Node: "pr1", CPUs: 1, MemMB: 256}}}},
		// An administrator's hold, which the job's user cannot release.
		{CmdHoldRelease, &HoldRelease{Now: t0.Add(9 * time.Hour), IDs: []uint64{60}, Hold: true, By: "root", Admin: true}},
		{CmdHoldRelease, &HoldRelease{Now: t0.Add(9 * time.Hour), IDs: []uint64{60}, Hold: false, By: "alice"}},
		// A node pinned to its key; another key refused; the key
		// forgotten for a reinstalled node.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(10 * time.Hour), Info: api.NodeInfo{Name: "k1", CPUs: 2, MemMB: 2048, Runner: "process", BootID: "boot-k"}, Key: "aaaa1111"}},
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(10 * time.Hour), Info: api.NodeInfo{Name: "k1", CPUs: 2, MemMB: 2048, Runner: "process", BootID: "boot-k"}, Key: "bbbb2222"}},
		{CmdForgetNodeKey, &ForgetNodeKey{Node: "k1", By: "oscar"}},
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(10 * time.Hour), Info: api.NodeInfo{Name: "k1", CPUs: 2, MemMB: 2048, Runner: "process", BootID: "boot-k2"}, Key: "bbbb2222"}},
		// A reusable join token, used by two nodes (a creation's Uses is
		// taken as 0).
		{CmdPutToken, &PutToken{Now: t0.Add(11 * time.Hour), Token: TokenRecord{Hash: HashSecret("j1"), Token: api.Token{
			ID: "join1", User: "root", Role: api.RoleAdmin, CreatedBy: "root", Created: t0.Add(11 * time.Hour), Expires: t0.Add(12 * time.Hour),
			Join: true, Reusable: true, Uses: 7}}}},
		{CmdUseJoinToken, &UseJoinToken{Now: t0.Add(11 * time.Hour), ID: "join1", Node: "j1"}},
		{CmdUseJoinToken, &UseJoinToken{Now: t0.Add(11 * time.Hour), ID: "join1", Node: "j2"}},
		// A node attests, then fails a re-attestation: it is drained.
		{CmdNodeAttest, &NodeAttest{Now: t0.Add(12 * time.Hour), Node: "k1", OK: true, EK: "ekfp", AK: []byte{1, 2, 3}}},
		{CmdNodeAttest, &NodeAttest{Now: t0.Add(13 * time.Hour), Node: "k1", Reason: "PCR 7 is 00…, the policy wants 11…"}},
		// Who asked, stamped by the leader into each change a user requests.
		{CmdPutAccount, &PutAccount{Account: api.Account{Name: "geo", Parent: "root", Shares: 1}, By: "root"}},
		{CmdPutUser, &PutUser{User: api.AccountUser{Name: "erin", Account: "geo", Shares: 1}, By: "root"}},
		{CmdPutQOS, &PutQOS{QOS: api.QOS{Name: "low", Priority: 1}, By: "oscar"}},
		{CmdSetConfig, &SetConfig{Settings: [][2]string{{"MinJobAge", "120"}}, By: "root"}},
		{CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "geo"}, By: "oscar"}},
		{CmdUpdateJob, &UpdateJob{Now: t0.Add(14 * time.Hour), ID: 60, By: "alice"}},
		{CmdSuspendJobs, &SuspendJobs{Now: t0.Add(14 * time.Hour), IDs: []uint64{60}, Suspend: true, ByUser: "alice"}},
		{CmdNodeDrain, &NodeDrain{Now: t0.Add(14 * time.Hour), Node: "k1", Drain: false, By: "oscar"}},
		{CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "erin", Role: api.RoleOperator}, By: "root"}},
		{CmdPutToken, &PutToken{Now: t0.Add(14 * time.Hour), By: "root", Token: TokenRecord{Hash: HashSecret("s3"), Token: api.Token{
			ID: "tok3", User: "erin", Role: api.RoleOperator, CreatedBy: "root", Created: t0.Add(14 * time.Hour), Expires: t0.Add(15 * time.Hour)}}}},
		// A seed with Slurm's QoS, on a cluster seeded already: nothing.
		{CmdSeedConfig, &SeedConfig{Partitions: []api.Partition{{Name: "late"}}, DefMemPerCPU: 1, Policy: "fcfs", QOS: []api.QOS{{Name: "normal"}}}},
		// scontrol requeuehold of the suspended job 60 by an administrator.
		{CmdRequeueJobs, &RequeueJobs{Now: t0.Add(15 * time.Hour), IDs: []uint64{60}, Hold: true, By: "root", Admin: true}},
		// scontrol update of every field a job update changes, on job 60
		// (requeued: COMPLETING, so the pending-only ones are refused).
		{CmdUpdateJob, &UpdateJob{Now: t0.Add(15 * time.Hour), ID: 60, By: "oscar", Dependency: &Dependency{Raw: "afterany:2", Clauses: []DepClause{{Type: "afterany", JobIDs: []string{"2"}}}},
			Changes: &JobEdits{TimeLimit: ptr(int64(600)), Name: ptr("n"), Comment: ptr("c"), Nice: ptr(5), Partition: ptr("geo"), QOS: ptr("low"),
				NTasks: ptr(2), CPUsPerTask: ptr(2), MemPerNode: ptr(int64(512)), Begin: ptr(t0), Throttle: ptr(1), SetDependency: true}}},
		{CmdUpdateJob, &UpdateJob{Now: t0.Add(15 * time.Hour), ID: 60, By: "alice", Changes: &JobEdits{TimeLimit: ptr(int64(300)), Comment: ptr("shorter")}}},
		// The cluster's licenses, and a job that holds two of them.
		{CmdSetConfig, &SetConfig{Settings: [][2]string{{"Licenses", "matlab:4,fluent"}}, By: "root"}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(16 * time.Hour), FirstID: 70, Jobs: []JobSpec{func() JobSpec {
			j := simple("licensed")
			j.Licenses = []api.License{{Name: "fluent", Count: 1}, {Name: "matlab", Count: 2}}
			return j
		}()}}},
		// A report carrying its run's start time (start_s). The leader
		// takes it out before proposing (it feeds a metric only); should
		// one reach the log, the apply ignores it.
		{CmdJobReports, &JobReports{Now: t0.Add(15 * time.Hour), Node: "k1", BootID: "boot-k2", Reports: []api.JobReport{
			{JobID: 60, StartIndex: 999, State: api.StateCompleted, StartSeconds: 2.5}}}},
		// The health check drains node k1 and, passing, resumes it.
		{CmdNodeDrain, &NodeDrain{Now: t0.Add(16 * time.Hour), Node: "k1", Drain: true, Reason: "health check failed: /scratch is full", By: api.HealthCheckUser, Health: true}},
		{CmdNodeDrain, &NodeDrain{Now: t0.Add(16 * time.Hour), Node: "k1", By: api.HealthCheckUser, Health: true}},
		// Live migration: its settings; two vm nodes that can migrate; job
		// 80 moved from w1 to w2 (requested, placed with a placement,
		// reported through the switch, its source released); job 81's
		// drain migration, placed by a pass, failing at the destination;
		// job 82's request cancelled; job 81's second one timing out.
		{CmdSetConfig, &SetConfig{Settings: [][2]string{{"MigrationDowntime", "30ms"}, {"MigrationBandwidth", "1024"}, {"MigrationMaxTime", "60"}}, By: "root"}},
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(17 * time.Hour), Info: api.NodeInfo{Name: "w1", CPUs: 4, MemMB: 4096, Runner: "vm",
			BootID: "boot-w1", APIAddr: "https://w1:7100", Accel: "tcg", Migrate: true}}},
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(17 * time.Hour), Info: api.NodeInfo{Name: "w2", CPUs: 4, MemMB: 8192, Runner: "vm",
			BootID: "boot-w2", APIAddr: "https://w2:7100", Accel: "tcg", Migrate: true, Inventory: goldenInventory()}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(17 * time.Hour), FirstID: 80, Jobs: []JobSpec{simple("mv"), simple("dr"), simple("late")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(17 * time.Hour), Starts: []PlanStart{{JobID: 80, Node: "w1", CPUs: 1, MemMB: 256},
			{JobID: 81, Node: "w1", CPUs: 1, MemMB: 256}, {JobID: 82, Node: "w1", CPUs: 1, MemMB: 256}}}},
		{CmdMigrateJobs, &MigrateJobs{Now: t0.Add(17 * time.Hour), Requests: []MigrateRequest{{Job: 80, To: "w2", By: "alice", Token: "gt-80"},
			{Job: 82, Token: "gt-82"}}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(17*time.Hour + time.Second), Migrations: []PlanMigration{
			{JobID: 80, From: "w1", To: "w2", Migration: 1, CPUs: 1, MemMB: 256,
				Placement: &api.Placement{CPUs: []int{0}, NUMANodes: []int{0}, Mem: []api.NodeAmount{{Node: 0, MB: 256}}, Score: 100}},
			{JobID: 81, From: "w1", To: "w2", Cause: "drain", By: "w1", Token: "gt-81", CPUs: 1, MemMB: 256, OverheadMB: 64}}}},
		{CmdMigrationReports, &MigrationReports{Now: t0.Add(17*time.Hour + 2*time.Second), Node: "w2", Reports: []api.MigrationReport{
			{Migration: 1, Alloc: 12, Event: "prepared"}, {Migration: 3, Alloc: 13, Event: "prepared"}}}},
		{CmdMigrationReports, &MigrationReports{Now: t0.Add(17*time.Hour + 3*time.Second), Node: "w1", Reports: []api.MigrationReport{
			{Migration: 1, Alloc: 9, Event: "streaming"}, {Migration: 1, Alloc: 9, Event: "sent", TotalMS: 150, StopMS: 6, Bytes: 1 << 24}}}},
		{CmdMigrationReports, &MigrationReports{Now: t0.Add(17*time.Hour + 4*time.Second), Node: "w2", Reports: []api.MigrationReport{
			{Migration: 1, Alloc: 12, Event: "loaded"}, {Migration: 1, Alloc: 12, Event: "resumed", SwitchMS: 11},
			{Migration: 3, Alloc: 13, Event: "failed", Message: "QEMU could not load the job's state"}}}},
		{CmdJobReports, &JobReports{Now: t0.Add(17*time.Hour + 5*time.Second), Node: "w1", BootID: "boot-w1", Reports: []api.JobReport{
			{Alloc: 9, JobID: 80, StartIndex: 85, State: api.StateCancelled, Signal: 9}}}},
		{CmdMigrateJobs, &MigrateJobs{Now: t0.Add(17*time.Hour + 6*time.Second), Requests: []MigrateRequest{{Job: 81, Token: "gt-81b", By: "bob"}}}},
		{CmdCancelMigrations, &CancelMigrations{Now: t0.Add(17*time.Hour + 7*time.Second), Jobs: []uint64{82}, By: "alice"}},
		{CmdExpireMigrations, &ExpireMigrations{Now: t0.Add(17*time.Hour + 2*time.Minute)}},
		// Advance reservations: a consumable capacity block of node g1
		// (2 CPUs, a GPU) for alice outside account chem, repeating
		// daily; a maintenance window of node k1; a job that names the
		// first; the second deleted and the first expired.
		{CmdPutReservation, &PutReservation{Now: t0.Add(18 * time.Hour), Create: true, By: "root", Reservation: api.Reservation{
			Name: "golden_cap", StartTime: t0.Add(20 * time.Hour), EndTime: t0.Add(21 * time.Hour), Nodes: []string{"g1"},
			Partition: "batch", Users: []string{"alice"}, NotAccounts: []string{"chem"},
			Flags: []api.ResvFlag{api.ResvPurgeComp, api.ResvDaily, api.ResvIgnoreJobs, api.ResvFlex, api.ResvSpecNodes},
			CPUs:  2, GPUs: 1, PurgeAfter: 300, Started: 1,
			Parts: []api.ResvPart{{Node: "g1", CPUs: 2, MemMB: 1024, GPUs: 1, UsedCPUs: 1, UsedGPUs: 1}}}}},
		{CmdPutReservation, &PutReservation{Now: t0.Add(18 * time.Hour), Create: true, By: "oscar", Reservation: api.Reservation{
			Name: "golden_maint", StartTime: t0.Add(19 * time.Hour), EndTime: t0.Add(20 * time.Hour), Nodes: []string{"k1"},
			NotUsers: []string{"bob"}, Accounts: []string{"geo"}, Flags: []api.ResvFlag{api.ResvMaint, api.ResvOverlap, api.ResvWeekly, api.ResvIgnoreJobs}}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(18 * time.Hour), FirstID: 90, Jobs: []JobSpec{func() JobSpec {
			j := simple("reserved")
			j.Reservation = "golden_cap"
			return j
		}()}}},
		{CmdPutReservation, &PutReservation{Now: t0.Add(18 * time.Hour), Delete: true, By: "oscar", Reservation: api.Reservation{Name: "golden_maint"}}},
		{CmdExpireReservations, &ExpireReservations{Now: t0.Add(18 * time.Hour), Names: []string{"golden_cap"}}},
		// Warm starts: a partition whose VMs all boot, a --no-warm job, and
		// a run whose VM started warm.
		{CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "cold", Warm: api.WarmNo}, By: "root"}},
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(19 * time.Hour), Info: api.NodeInfo{Name: "wm1", CPUs: 2, MemMB: 2048,
			Runner: "vm", BootID: "boot-wm"}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(19 * time.Hour), FirstID: 100, Jobs: []JobSpec{func() JobSpec {
			sp := simple("booted")
			sp.NoWarm = true
			return sp
		}(), simple("restored")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(19*time.Hour + time.Second), Starts: []PlanStart{{JobID: 101, Node: "wm1", CPUs: 1, MemMB: 256}}}},
		{CmdJobReports, &JobReports{Now: t0.Add(19*time.Hour + time.Minute), Node: "wm1", BootID: "boot-wm", Reports: []api.JobReport{
			{JobID: 101, StartIndex: 103, State: api.StateCompleted, VMStart: api.VMStartWarm}}}},
		// A node offering its multi-node jobs' private networks.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(20 * time.Hour), Info: api.NodeInfo{Name: "ov1", CPUs: 2, MemMB: 2048,
			Runner: "vm", BootID: "boot-ov1", Overlay: "192.0.2.1:4789"}}},
		// Multi-node requests and node features: a node reporting its
		// features, a job asking for nodes by range, list and feature,
		// an operator's features in place of the node's, then the node's
		// again.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(27 * time.Hour), Info: api.NodeInfo{Name: "f1", CPUs: 4, MemMB: 4096,
			Runner: "process", BootID: "boot-f", Features: []string{"intel", "ib"}}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(27 * time.Hour), FirstID: 180, Jobs: []JobSpec{func() JobSpec {
			j := simple("wide")
			j.Nodes, j.NodesMax, j.NTasks, j.NTasksPerNode = 2, 4, 0, 2
			j.Exclusive, j.NodeList, j.Exclude, j.Constraint = true, "f1", "k1", "intel&[r1|r2]"
			j.Distribution, j.SpreadJob, j.Contiguous = "cyclic", true, true
			return j
		}()}}},
		{CmdSetNodeFeatures, &SetNodeFeatures{Node: "f1", Features: []string{"gpu", "amd"}, By: "oscar"}},
		{CmdSetNodeFeatures, &SetNodeFeatures{Node: "f1", Reset: true, By: "oscar"}},
		// A two-node job started whole (rank 0 on f1, rank 1 on f2), then
		// f2 lost: f1 is told to stop the run, as NODE_FAIL.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(28 * time.Hour), Info: api.NodeInfo{Name: "f2", CPUs: 4, MemMB: 8192,
			Runner: "vm", BootID: "boot-f2", Inventory: goldenInventory(), OverheadMB: 16}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(28 * time.Hour), FirstID: 190, Jobs: []JobSpec{func() JobSpec {
			j := simple("gang")
			j.Nodes, j.NTasks = 2, 2
			return j
		}()}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(28*time.Hour + time.Second), Starts: []PlanStart{{JobID: 190, Node: "f1", CPUs: 1, MemMB: 256,
			Parts: []PlanPart{{Node: "f2", CPUs: 1, MemMB: 256, OverheadMB: 16,
				Placement: &api.Placement{CPUs: []int{1}, NUMANodes: []int{1}, Mem: []api.NodeAmount{{Node: 1, MB: 256}}, Score: 90}}}}}}},
		{CmdNodeDown, &NodeDown{Now: t0.Add(29 * time.Hour), Nodes: []string{"f2"}, Reason: "Not responding"}},
		// A job's steps: one begun on f3 and ended, one begun and
		// cancelled.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(30 * time.Hour), Info: api.NodeInfo{Name: "f3", CPUs: 2, MemMB: 2048,
			Runner: "process", BootID: "boot-f3"}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(30 * time.Hour), FirstID: 195, Jobs: []JobSpec{simple("steps")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(30 * time.Hour), Starts: []PlanStart{{JobID: 195, Node: "f3", CPUs: 1, MemMB: 256}}}},
	}
	// The run just started is at the index of the entry above.
	run := uint64(len(cmds))
	cmds = append(cmds, []struct {
		t CommandType
		p any
	}{
		{CmdSteps, &Steps{Now: t0.Add(30*time.Hour + time.Second), Begin: []StepBegin{
			{Job: 195, Run: run, Name: "hostname", Nodes: []string{"f3"}, NTasks: 2, CPUsPerTask: 1},
			{Job: 195, Run: run, Name: "sleep", Nodes: []string{"f3"}, NTasks: 1}}}},
		{CmdSteps, &Steps{Now: t0.Add(30*time.Hour + time.Minute), End: []StepEnd{{Job: 195, Step: 0, State: api.StateFailed, ExitCode: 1, Signal: 0}},
			Cancel: []StepEnd{{Job: 195, Step: 1, Signal: 9}}, By: "alice"}},
	}...)
	// Live migration's drains, checkpoints and preemption by moving, after
	// the steps; then notifications, deadlines, the launch options,
	// scratch space and scontrol top.
	return append(cmds, []struct {
		t CommandType
		p any
	}{
		// Node w1 drained by migration: a pass moves job 81 and says
		// that job 82 stays.
		{CmdNodeDrain, &NodeDrain{Now: t0.Add(18 * time.Hour), Node: "w1", Drain: true, Reason: "new firmware", By: "oscar", Migrate: true}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(18*time.Hour + time.Second),
			Migrations: []PlanMigration{{JobID: 81, From: "w1", To: "w2", Cause: "drain", By: "w1", Token: "gt-81c", CPUs: 1, MemMB: 256}},
			DrainNotes: []PlanDrainNote{{Node: "w1", Note: "job 82 fits on no other node"}}}},
		// A checkpoint: job 110 saved on w3 into the shared checkpoint
		// directory, its run ended, restored on w4.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(19 * time.Hour), Info: api.NodeInfo{Name: "w3", CPUs: 2, MemMB: 4096, Runner: "vm",
			BootID: "boot-w3", APIAddr: "https://w3:7100", Accel: "tcg", Migrate: true, CheckpointDir: "/shared/checkpoints"}}},
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(19 * time.Hour), Info: api.NodeInfo{Name: "w4", CPUs: 2, MemMB: 4096, Runner: "vm",
			BootID: "boot-w4", APIAddr: "https://w4:7100", Accel: "tcg", Migrate: true, CheckpointDir: "/shared/checkpoints"}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(19 * time.Hour), FirstID: 110, Jobs: []JobSpec{simple("parked")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(19 * time.Hour), Starts: []PlanStart{{JobID: 110, Node: "w3", CPUs: 1, MemMB: 256}}}},
		{CmdCheckpointJobs, &CheckpointJobs{Now: t0.Add(19*time.Hour + time.Minute), IDs: []uint64{110}, By: "alice"}},
		{CmdCheckpointReports, &CheckpointReports{Now: t0.Add(19*time.Hour + 2*time.Minute), Node: "w3", Reports: []api.CheckpointReport{
			{Job: 110, Alloc: 19, Event: "saved", Path: "/shared/checkpoints/110-19.ckpt", Size: 69 << 20, SHA256: "9f86d081", TookMS: 450},
			{Job: 80, Alloc: 12, Event: "failed", Message: "not being saved"}}}},
		{CmdJobReports, &JobReports{Now: t0.Add(19*time.Hour + 3*time.Minute), Node: "w3", BootID: "boot-w3", Reports: []api.JobReport{
			{Alloc: 19, JobID: 110, StartIndex: 124, State: api.StateCancelled, Signal: 9}}}},
		{CmdRestoreJobs, &RestoreJobs{Now: t0.Add(20 * time.Hour), IDs: []uint64{110}, To: "w4", By: "alice"}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(20 * time.Hour), Starts: []PlanStart{{JobID: 110, Node: "w4", CPUs: 1, MemMB: 256}}}},
		{CmdCheckpointReports, &CheckpointReports{Now: t0.Add(20*time.Hour + time.Second), Node: "w4", Reports: []api.CheckpointReport{
			{Job: 110, Alloc: 20, Event: "restored", TookMS: 300}}}},
		// Preemption by migration and by checkpoint: a QoS that moves its
		// victims, parking them when no node has room; a pass that moves
		// job 120 from w3 to w4 and parks job 121 for job 122; job 121
		// saved, back in the queue to be restored.
		{CmdPutQOS, &PutQOS{QOS: api.QOS{Name: "mover", PreemptMode: api.PreemptMigrate, PreemptFallback: api.PreemptCheckpoint}, By: "oscar"}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(21 * time.Hour), FirstID: 120, Jobs: []JobSpec{simple("pm"), simple("pc")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(21 * time.Hour), Starts: []PlanStart{{JobID: 120, Node: "w3", CPUs: 1, MemMB: 256},
			{JobID: 121, Node: "w3", CPUs: 1, MemMB: 256}}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(21*time.Hour + time.Minute), Stops: []PlanStop{{JobID: 121, Mode: api.PreemptCheckpoint, By: 122}},
			Migrations: []PlanMigration{{JobID: 120, From: "w3", To: "w4", Cause: "preempt", By: "job 122", Token: "gt-120", CPUs: 1, MemMB: 256}}}},
		{CmdCheckpointReports, &CheckpointReports{Now: t0.Add(21*time.Hour + 2*time.Minute), Node: "w3", Reports: []api.CheckpointReport{
			{Job: 121, Alloc: 22, Event: "saved", Path: "/shared/checkpoints/121-22.ckpt", Size: 69 << 20, SHA256: "2c26b46b", TookMS: 400}}}},
		// Job notifications: the mail settings, a job that asks for them,
		// its start (BEGIN), its 50 % warning, a claim and the deliveries.
		{CmdSetConfig, &SetConfig{Settings: [][2]string{{"MailProg", "/usr/local/bin/notify"}, {"MailWebhook", "https://hooks.example/x"},
			{"MailDomain", "example.org"}}, By: "root"}},
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(37 * time.Hour), Info: api.NodeInfo{Name: "ml1", CPUs: 2, MemMB: 2048, Runner: "process", BootID: "boot-ml"}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(37 * time.Hour), FirstID: 200, Jobs: []JobSpec{func() JobSpec {
			j := simple("mailed")
			j.TimeLimit, j.MailUser = 600, "alice@lab.example"
			j.MailType = []string{api.MailBegin, api.MailEnd, api.MailTimeLimit50}
			return j
		}()}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(37*time.Hour + time.Second), Starts: []PlanStart{{JobID: 200, Node: "ml1", CPUs: 1, MemMB: 256}}}},
		{CmdMailTimeEvents, &MailTimeEvents{Now: t0.Add(37*time.Hour + 301*time.Second), Jobs: []uint64{200}}},
		{CmdClaimNotices, &ClaimNotices{Now: t0.Add(37*time.Hour + 302*time.Second), IDs: []uint64{1, 2}, By: "c1"}},
		{CmdNoticesDone, &NoticesDone{Now: t0.Add(37*time.Hour + 303*time.Second), Marks: []NoticeMark{
			{ID: 1, Sinks: SinkMailProg | SinkWebhook}, {ID: 2, Sinks: SinkWebhook, Failed: true}}}},
		// A job with a --deadline it can no longer meet: the pass cancels
		// it (DEADLINE).
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(38 * time.Hour), FirstID: 210, Jobs: []JobSpec{func() JobSpec {
			j := simple("deadline")
			j.TimeLimit, j.Deadline = 7200, t0.Add(39*time.Hour)
			return j
		}()}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(38*time.Hour + time.Second), Cancels: []PlanCancel{
			{JobID: 210, Reason: "the scheduler: it could no longer end by its --deadline", Deadline: true}}}},
		// How the node starts a job (-i, --open-mode, --propagate,
		// --get-user-env) and the request's other sbatch options
		// (--priority, --cpus-per-gpu, -O).
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(39 * time.Hour), FirstID: 211, Jobs: []JobSpec{func() JobSpec {
			j := simple("launch")
			j.OpenMode, j.Input, j.GetUserEnv = api.OpenModeAppend, "in-%j.txt", true
			j.Rlimits = []api.Rlimit{{Name: "NOFILE", Value: 1024}, {Name: "STACK", Value: api.RlimitUnlimited}}
			j.Priority, j.CPUsPerGPU, j.Overcommit, j.MemAll = 5000, 4, true, true
			j.Hint, j.ThreadsPerCore, j.NTasksPerCore, j.MemBind, j.MemNodes = api.HintMemoryBound, 1, 1, "map_mem:1", []int{1}
			j.Gres = []api.Gres{{Name: "gpu", Count: 1}}
			return j
		}()}}},
		// A start on one thread of a core, the other held idle
		// (--hint=nomultithread).
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(39 * time.Hour), FirstID: 212, Jobs: []JobSpec{func() JobSpec {
			j := simple("wholecore")
			j.Hint = api.HintNoMultithread
			return j
		}()}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(39*time.Hour + time.Second), Starts: []PlanStart{{JobID: 212, Node: "g1", CPUs: 1, MemMB: 256, OverheadMB: 64,
			Placement: &api.Placement{CPUs: []int{1}, Idle: []int{3}, NUMANodes: []int{1}, Mem: []api.NodeAmount{{Node: 1, MB: 256}}, Score: 100}}}}},
		// Scratch space: a node that offers it and a start that holds it
		// (--tmp).
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(39 * time.Hour), Info: api.NodeInfo{Name: "tmp1", CPUs: 2, MemMB: 2048, Runner: "process",
			BootID: "boot-tmp", TmpMB: 10240}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(39 * time.Hour), FirstID: 213, Jobs: []JobSpec{func() JobSpec {
			j := simple("scratch")
			j.TmpMB = 4096
			return j
		}()}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(39*time.Hour + time.Second), Starts: []PlanStart{{JobID: 213, Node: "tmp1", CPUs: 1, MemMB: 256, TmpMB: 4096}}}},
		// scontrol top: job 211 before job 200's array mates.
		{CmdTopJobs, &TopJobs{Now: t0.Add(40 * time.Hour), Nice: []JobNice{{ID: 211, Nice: -50}, {ID: 200, Nice: 50}}, By: "alice"}},
		// scontrol update MinTmpDiskNode of a pending job.
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(41 * time.Hour), FirstID: 214, Jobs: []JobSpec{func() JobSpec {
			j := simple("more-scratch")
			j.Hold = true
			return j
		}()}}},
		{CmdUpdateJob, &UpdateJob{Now: t0.Add(41 * time.Hour), ID: 214, By: "alice", Changes: &JobEdits{TmpMB: ptr(int64(2048))}}},
		// A multi-node start whose every node holds --tmp's scratch space.
		{CmdRegisterNode, &RegisterNode{Now: t0.Add(42 * time.Hour), Info: api.NodeInfo{Name: "tmp2", CPUs: 2, MemMB: 2048, Runner: "process",
			BootID: "boot-tmp2", TmpMB: 2048}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(42 * time.Hour), FirstID: 215, Jobs: []JobSpec{func() JobSpec {
			j := simple("scratch-gang")
			j.Nodes, j.NTasks, j.TmpMB = 2, 2, 1024
			return j
		}()}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(42*time.Hour + time.Second), Starts: []PlanStart{{JobID: 215, Node: "tmp1", CPUs: 1, MemMB: 256, TmpMB: 1024,
			Parts: []PlanPart{{Node: "tmp2", CPUs: 1, MemMB: 256, TmpMB: 1024}}}}}},
	}...)
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// goldenAudit is an audit entry with every field set.
func goldenAudit() *AuditRecords {
	recs := []AuditRecord{
		{Tenant: "chem", Time: t0.Add(8 * time.Hour), Principal: "user carol (token tok1)", User: "carol", Op: "POST /v1/jobs/cancel",
			Target: "jobs 1", Status: 403, Message: "job 1: permission denied", RequestID: "req-1"},
		{Tenant: "chem", Time: t0.Add(8 * time.Hour), Principal: "user carol (token tok1)", User: "carol", Op: "POST /v1/jobs", Target: "jobs 60", Status: 200},
		{Time: t0.Add(8 * time.Hour), Principal: "user root (token root)", User: "root", Op: "POST /v1/config", Status: 200},
	}
	api.ChainAudit(map[string]AuditHead{}, recs)
	return &AuditRecords{Now: t0.Add(8 * time.Hour), Records: recs, Keep: 1000, Retention: 30 * 24 * time.Hour}
}

// goldenLine writes one entry as a line of the golden log.
func goldenLine(t testing.TB, ct CommandType, p any) string {
	data, err := Encode(ct, p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d %s %s", data[0], ct, data[1:])
}

// readGolden reads the committed golden log as framed entries.
func readGolden(t testing.TB) (entries [][]byte, lines []string) {
	f, err := os.ReadFile(goldenLog)
	if err != nil {
		t.Fatalf("reading the golden log: %v (run go test ./ctld/state -run Golden -update to create it)", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		num, rest, _ := strings.Cut(line, " ")
		_, payload, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || n > 255 {
			t.Fatalf("golden log line %d: %q does not start with a command type", len(lines)+1, line)
		}
		entries = append(entries, append([]byte{byte(n)}, payload...))
		lines = append(lines, line)
	}
	return entries, lines
}

func TestGoldenLog(t *testing.T) {
	cmds := goldenCommands()
	if *updateGolden {
		var log, hashes strings.Builder
		r := newReplica()
		for i, c := range cmds {
			log.WriteString(goldenLine(t, c.t, c.p) + "\n")
			r.Apply(entry(t, uint64(i+1), c.t, c.p))
			hashes.WriteString(r.Hash() + "\n")
		}
		if err := os.WriteFile(goldenLog, []byte(log.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenHashes, []byte(hashes.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries, lines := readGolden(t)
	hashText, err := os.ReadFile(goldenHashes)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(hashText))
	if len(want) != len(entries) {
		t.Fatalf("the golden log has %d entries and %d hashes", len(entries), len(want))
	}
	r := newReplica()
	for i, data := range entries {
		ct, p, err := Decode(data)
		if err != nil {
			t.Fatalf("golden entry %d (%s) no longer decodes: %v", i+1, lines[i], err)
		}
		r.s.Apply(uint64(i+1), ct, p)
		if h := r.Hash(); h != want[i] {
			t.Fatalf("after golden entry %d (%s) the state hash is %s, was %s: the entry decodes or applies differently, or the snapshot encodes differently; if that is deliberate, run go test ./ctld/state -run Golden -update and commit the diff",
				i+1, ct, h, want[i])
		}
	}
	for i, c := range cmds {
		if i >= len(lines) {
			t.Errorf("goldenCommands has entry %d (%s) that the golden log lacks; run go test ./ctld/state -run Golden -update", i+1, c.t)
			continue
		}
		if got := goldenLine(t, c.t, c.p); got != lines[i] {
			t.Errorf("golden entry %d encodes differently now:\nwas %s\nnow %s\n(a renamed or retyped JSON field changes what replicas read from old logs)", i+1, lines[i], got)
		}
	}
}

// TestGoldenLogCoversEveryField checks that every command type has an entry
// in the golden log and that every field of every struct reachable from the
// payloads is set (non-zero) in at least one entry.
func TestGoldenLogCoversEveryField(t *testing.T) {
	entries, _ := readGolden(t)
	seen := map[CommandType]bool{}
	set := map[reflect.Type]map[string]bool{}
	for _, data := range entries {
		ct, p, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		seen[ct] = true
		markFields(reflect.ValueOf(p), set)
	}
	for _, ct := range CommandTypes() {
		if !seen[ct] {
			t.Errorf("%s has no entry in the golden log: add one to goldenCommands and run go test ./ctld/state -run Golden -update", ct)
		}
	}
	for typ, fields := range set {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if f.IsExported() && !fields[f.Name] {
				t.Errorf("field %s of %s is zero in every entry of the golden log: set it in goldenCommands and run go test ./ctld/state -run Golden -update", f.Name, typ)
			}
		}
	}
}

// markFields records, for every struct under v, which fields are non-zero.
func markFields(v reflect.Value, set map[reflect.Type]map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			markFields(v.Elem(), set)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			markFields(v.Index(i), set)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			markFields(it.Value(), set)
		}
	case reflect.Struct:
		if v.Type() == timeType {
			return
		}
		fields := set[v.Type()]
		if fields == nil {
			fields = map[string]bool{}
			set[v.Type()] = fields
		}
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				if !v.Field(i).IsZero() {
					fields[f.Name] = true
				}
				markFields(v.Field(i), set)
			}
		}
	}
}
