package display

import (
	"strings"
	"testing"
	"time"

	"corral/api"
)

// showJobGoldens are whole `scontrol show job` records.
var showJobGoldens = map[string]struct {
	job  api.Job
	want string
}{
	"pending": {pendingJob(), `JobId=12 JobName=sim
   UserId=bob Account=(null) QOS=(null)
   Priority=100 Nice=0
   JobState=PENDING Reason=Priority Dependency=(null)
   Requeue=0 Restarts=0 BatchFlag=1 ExitCode=0:0
   RunTime=00:00:00 TimeLimit=UNLIMITED
   SubmitTime=2024-03-01T09:59:00 EligibleTime=2024-03-01T09:59:00
   StartTime=Unknown EndTime=Unknown
   SuspendTime=None SecsSuspended=0
   Partition=batch NodeList=(null)
   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1
   ReqNodeList=(null) ExcNodeList=(null)
   Features=(null) OverSubscribe=OK Contiguous=0
   ReqTRES=cpu=1,node=1
   AllocTRES=(null)
   MinMemoryNode=0 MinTmpDiskNode=0
   Gres=(null) Licenses=(null) Array=(null)
   Command=/home/bob/sim
   WorkDir=/home/bob
   StdErr=/home/bob/slurm-12.out
   StdIn=/dev/null
   StdOut=/home/bob/slurm-12.out
   Comment=(null)

`},
	"running": {runningJob(), `JobId=42 JobName=train.sh
   UserId=alice Account=physics QOS=high
   Priority=2147483648 Nice=10
   JobState=RUNNING Reason=None Dependency=afterok:41
   Requeue=1 Restarts=1 BatchFlag=1 ExitCode=0:0
   RunTime=01:02:03 TimeLimit=02:00:00
   SubmitTime=2024-03-01T08:00:00 EligibleTime=2024-03-01T08:00:00
   StartTime=2024-03-01T08:57:57 EndTime=2024-03-01T10:57:57
   SuspendTime=None SecsSuspended=0
   Partition=gpu NodeList=gpu01
   BatchHost=gpu01
   NumNodes=1 NumCPUs=4 NumTasks=2 CPUs/Task=2
   ReqNodeList=(null) ExcNodeList=(null)
   Features=(null) OverSubscribe=OK Contiguous=0
   ReqTRES=cpu=4,mem=1.50G,node=1,gres/gpu:a100=2
   AllocTRES=cpu=4,mem=1.50G,node=1,gres/gpu:a100=2
   MinMemoryNode=1.50G MinTmpDiskNode=0
   Gres=gres/gpu:a100:2 Licenses=(null) Array=0-3
   Command=/home/alice/run/train.sh
   WorkDir=/home/alice/run
   StdErr=/home/alice/run/out-42.txt
   StdIn=/dev/null
   StdOut=/home/alice/run/out-42.txt
   Comment=nightly

`},
	"finished": {finishedJob(), `JobId=7 JobName=build
   UserId=carol Account=eng QOS=(null)
   Priority=5 Nice=0
   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)
   Requeue=0 Restarts=0 BatchFlag=1 ExitCode=3:0
   RunTime=00:00:30 TimeLimit=00:10:00
   SubmitTime=2024-03-01T08:00:00 EligibleTime=2024-03-01T08:00:00
   StartTime=2024-03-01T09:00:00 EndTime=2024-03-01T09:00:30
   SuspendTime=None SecsSuspended=0
   Partition=batch NodeList=n3
   BatchHost=n3
   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1
   ReqNodeList=(null) ExcNodeList=(null)
   Features=(null) OverSubscribe=OK Contiguous=0
   ReqTRES=cpu=1,mem=500M,node=1
   AllocTRES=cpu=1,mem=500M,node=1
   MinMemoryCPU=500M MinTmpDiskNode=0
   Gres=(null) Licenses=(null) Array=(null)
   Command=/src/build
   WorkDir=/src
   StdErr=/src/err.log
   StdIn=/dev/null
   StdOut=/src/slurm-7.out
   Comment=(null)
   Message=script exited with status 3

`},
}

func TestShowJob(t *testing.T) {
	for name, tc := range showJobGoldens {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			ShowJob(&b, &tc.job, t0)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

// TestShowJobLines checks lines that only some jobs have.
func TestShowJobLines(t *testing.T) {
	held := pendingJob()
	held.Reason = api.ReasonJobHeldUser
	held.Spec.Hold = true
	susp := runningJob()
	susp.State = api.StateSuspended
	susp.SuspendTime = t0.Add(-2 * time.Minute)
	susp.SuspendedFor = 30 * time.Second
	susp.Spec.Image = "ubuntu-24.04"
	migratable := runningJob()
	migratable.Migratable = "yes"
	pinned := runningJob()
	pinned.Migratable, pinned.MigrationBlocker = "no", "it asked for --no-migrate: its files go over the fast share (virtiofs)"
	moved := runningJob()
	moved.Migrations = []api.Migration{
		{ID: 3, From: "n1", To: "n2", Phase: "released", Cause: "preempt", By: "job 10", TotalMS: 3013, DowntimeMS: 3093, Bytes: 73400320},
		{ID: 4, From: "n2", Phase: "aborted", Cause: "request", By: "alice", Error: "no node could take the job within 1m0s"}}
	parked := pendingJob()
	parked.Checkpoint = &api.JobCheckpoint{Phase: "restoring", Node: "n1", Path: "/ck/n1-12-7.ckpt", Size: 69 << 20, SaveMS: 450, By: "job 10"}
	warm := runningJob()
	warm.State, warm.CPUSeconds, warm.PeakMemKB, warm.VMStart = api.StateCompleted, 3, 2048, api.VMStartWarm
	mailed := pendingJob()
	mailed.Spec.MailType = []string{api.MailBegin, api.MailEnd, api.MailTimeLimit80}
	scratch := runningJob()
	scratch.Spec.TmpMB = 2048
	lines := map[string]struct {
		job  api.Job
		want string
	}{
		"mail":                     {mailed, "   Comment=(null)\n   MailUser=bob MailType=BEGIN,END,TIME_LIMIT_80\n"},
		"scratch space (--tmp)":    {scratch, "   MinMemoryNode=1.50G MinTmpDiskNode=2G\n"},
		"held job is not eligible": {held, "   SubmitTime=2024-03-01T09:59:00 EligibleTime=Unknown\n"},
		"suspended time":           {susp, "   SuspendTime=2024-03-01T09:58:00 SecsSuspended=30\n"},
		"suspended run time stops": {susp, "   RunTime=00:59:33 TimeLimit=02:00:00\n"},
		"expected end moves":       {susp, "EndTime=2024-03-01T10:58:27\n"},
		"image":                    {susp, "   Gres=gres/gpu:a100:2 Licenses=(null) Array=0-3 Image=ubuntu-24.04\n"},
		"migratable":               {migratable, "ExitCode=0:0\n   Migratable=Yes\n"},
		"not migratable, and why":  {pinned, "   Migratable=No MigrationBlocker=it asked for --no-migrate: its files go over the fast share (virtiofs)\n"},
		"a migration for a preemption": {moved,
			"   Migration=3 From=n1 To=n2 Phase=released Cause=preempt By=job 10 TotalTime=3013ms Downtime=3093ms Bytes=73400320\n"},
		"an aborted migration": {moved,
			"   Migration=4 From=n2 To=(null) Phase=aborted Cause=request By=alice Error=no node could take the job within 1m0s\n"},
		"a checkpoint for a preemption": {parked,
			"   Checkpoint=restoring CheckpointNode=n1 CheckpointBy=job 10 CheckpointFile=/ck/n1-12-7.ckpt CheckpointBytes=72351744 SaveTime=450ms\n"},
		"a VM restored warm": {warm, "   TotalCPU=00:00:03 MaxRSS=2048K\n   VMStart=warm\n"},
	}
	for name, tc := range lines {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			ShowJob(&b, &tc.job, t0)
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, b.String())
			}
		})
	}
}

func TestShowJobBeginTime(t *testing.T) {
	j := pendingJob()
	j.Spec.Begin = t0.Add(time.Hour)
	var b strings.Builder
	ShowJob(&b, &j, t0.In(time.FixedZone("X", -3600)))
	if want := "SubmitTime=2024-03-01T08:59:00 EligibleTime=2024-03-01T10:00:00"; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
}

func TestShowNode(t *testing.T) {
	nodes, _ := clusterNodes()
	vm := api.Node{
		NodeInfo: api.NodeInfo{
			Name: "vm1", CPUs: 16, MemMB: 65536, Partitions: []string{"gpu"}, Runner: "vm",
			Version: "0.3.1", Images: []string{"ubuntu-24.04", "rocky-9"}, Accel: "kvm", Features: []string{"intel"},
		},
		ActiveFeatures: []string{"amd", "ib"}, FeaturesBy: "oscar",
		Down: true, Drain: true, Reason: "hypervisor upgrade", ReasonUser: "oscar", ReasonTime: t0.Add(-90e9),
		AllocCPUs: 4, AllocMemMB: 4096,
		Jobs: []uint64{42, 43},
	}
	vm.TmpMB, vm.AllocTmpMB = 102400, 2048
	tests := map[string]struct {
		node api.Node
		want string
	}{
		"mixed": {nodes[2], `NodeName=n3
   CPUAlloc=2 CPUTot=4
   RealMemory=8000 AllocMem=2000 FreeMem=6000
   State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=1
   Partitions=batch,gpu
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Runner=process
   SlurmdStartTime=2024-02-29T10:00:00 LastSeen=2024-03-01T09:59:57 HeartbeatAge=00:00:03
   Jobs=(null)

`},
		"drained with reason": {nodes[5], `NodeName=n10
   CPUAlloc=0 CPUTot=4
   RealMemory=8000 AllocMem=0 FreeMem=8000
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1
   Partitions=batch
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Runner=process
   SlurmdStartTime=2024-02-29T10:00:00 LastSeen=2024-03-01T09:59:57 HeartbeatAge=00:00:03
   Jobs=(null)
   Reason=disk swap

`},
		"vm runner, down and drained": {vm, `NodeName=vm1 Version=0.3.1
   CPUAlloc=4 CPUTot=16
   RealMemory=65536 AllocMem=4096 FreeMem=61440
   State=DOWN+DRAIN ThreadsPerCore=1 TmpDisk=102400 Weight=1
   Partitions=gpu
   AvailableFeatures=amd,ib
   ActiveFeatures=amd,ib FeaturesSetBy=oscar ReportedFeatures=intel
   Runner=vm Images=ubuntu-24.04,rocky-9 Accel=kvm
   SlurmdStartTime=None LastSeen=None HeartbeatAge=N/A
   Jobs=42,43
   Reason=hypervisor upgrade [oscar@2024-03-01T09:58:30]

`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			ShowNode(&b, &tc.node, t0)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestNodeStateFull(t *testing.T) {
	tests := map[string]struct {
		node api.Node
		want string
	}{
		"idle":               {api.Node{NodeInfo: api.NodeInfo{CPUs: 2}}, "IDLE"},
		"mixed":              {api.Node{NodeInfo: api.NodeInfo{CPUs: 2}, AllocCPUs: 1}, "MIXED"},
		"allocated":          {api.Node{NodeInfo: api.NodeInfo{CPUs: 2}, AllocCPUs: 2}, "ALLOCATED"},
		"down":               {api.Node{NodeInfo: api.NodeInfo{CPUs: 2}, Down: true}, "DOWN"},
		"drained":            {api.Node{NodeInfo: api.NodeInfo{CPUs: 2}, Drain: true}, "IDLE+DRAIN"},
		"draining mixed":     {api.Node{NodeInfo: api.NodeInfo{CPUs: 2}, Drain: true, AllocCPUs: 1}, "MIXED+DRAIN"},
		"draining allocated": {api.Node{NodeInfo: api.NodeInfo{CPUs: 2}, Drain: true, AllocCPUs: 2}, "ALLOCATED+DRAIN"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := nodeStateFull(&tc.node); got != tc.want {
				t.Errorf("nodeStateFull = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLongDurations(t *testing.T) {
	tests := map[string]struct {
		secs int64
		want string
	}{
		"zero":     {0, "00:00:00"},
		"seconds":  {5, "00:00:05"},
		"hours":    {3723, "01:02:03"},
		"days":     {2*86400 + 1, "2-00:00:01"},
		"negative": {-5, "INVALID"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := string(appendLongSecs(nil, tc.secs)); got != tc.want {
				t.Errorf("appendLongSecs(%d) = %q, want %q", tc.secs, got, tc.want)
			}
		})
	}
}

// TestShowJobNodes checks how show job writes a multi-node request: the
// node range, tasks per node, the host lists, the constraint, exclusive
// and the distribution.
func TestShowJobNodes(t *testing.T) {
	j := pendingJob()
	s := &j.Spec
	s.Nodes, s.NodesMax, s.NTasks, s.NTasksPerNode, s.CPUsPerTask = 2, 4, 0, 2, 3
	s.NodeList, s.Exclude, s.Constraint, s.Exclusive = "n[1-2]", "n9", "intel&[r1|r2]", true
	s.Distribution, s.SpreadJob = "cyclic", true
	var b strings.Builder
	ShowJob(&b, &j, t0)
	for _, want := range []string{
		"NumNodes=2-4 NumCPUs=24 NumTasks=4 CPUs/Task=3 NtasksPerNode=2\n",
		"ReqNodeList=n[1-2] ExcNodeList=n9\n",
		"Features=intel&[r1|r2] OverSubscribe=NO Contiguous=0 Distribution=cyclic SpreadJob=1\n",
		"ReqTRES=cpu=24,node=2\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("show job lacks %q:\n%s", want, b.String())
		}
	}
}
