package display

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/internal/hostlist"
)

// kvWriter builds scontrol's layout: a first line, then lines indented by
// three spaces, each of space-separated Key=Value pairs.
type kvWriter struct {
	buf  []byte
	loc  *time.Location
	line int // pairs on the current line
}

func (k *kvWriter) newLine() {
	if k.buf != nil {
		k.buf = append(k.buf, "\n   "...)
	} else {
		k.buf = []byte{}
	}
	k.line = 0
}

func (k *kvWriter) key(name string) {
	if k.line > 0 {
		k.buf = append(k.buf, ' ')
	}
	k.line++
	k.buf = append(k.buf, name...)
	k.buf = append(k.buf, '=')
}

// str writes a value made safe for a terminal (appendSafe).
func (k *kvWriter) str(name, v string) {
	k.key(name)
	k.buf = appendSafe(k.buf, v)
}

func (k *kvWriter) int(name string, v int64) {
	k.key(name)
	k.buf = strconv.AppendInt(k.buf, v, 10)
}

// time writes a time stamp, or none (scontrol's "Unknown" or "None") for the
// zero time.
func (k *kvWriter) time(name string, t time.Time, none string) {
	k.key(name)
	k.buf = appendTime(k.buf, t, k.loc, none)
}

func (k *kvWriter) done(w io.Writer) {
	k.buf = append(k.buf, "\n\n"...)
	// The signature the CLI uses returns nothing; a failed write to a
	// terminal or pipe has nobody to report to here.
	_, _ = w.Write(k.buf)
}

// ShowJob renders one job like `scontrol show job`. now is the time RunTime
// is measured to; times are shown in now's location. Unset strings print as
// (null), unknown times as Unknown. StdOut and StdErr show the path as
// submitted: patterns such as %j are not expanded here.
func ShowJob(w io.Writer, j *api.Job, now time.Time) {
	k := &kvWriter{loc: now.Location()}
	k.newLine()
	k.str("JobId", strconv.FormatUint(j.ID, 10))
	if j.ArrayJobID != 0 {
		k.str("ArrayJobId", strconv.FormatUint(j.ArrayJobID, 10))
		if j.IsArrayTask() {
			k.str("ArrayTaskId", strconv.Itoa(j.ArrayTaskID))
		} else {
			ref := j.Ref()
			k.str("ArrayTaskId", ref[strings.IndexByte(ref, '_')+2:len(ref)-1])
		}
	}
	k.str("JobName", j.Spec.Name)
	k.newLine()
	k.str("UserId", j.Spec.User)
	k.str("Account", orNull(j.Spec.Account))
	k.str("QOS", orNull(j.Spec.QOS))
	k.newLine()
	k.int("Priority", j.Priority)
	k.int("Nice", int64(j.Spec.Nice))
	k.newLine()
	k.str("JobState", string(j.State))
	// Slurm writes a reason's spaces as underscores here, so that the
	// line stays KEY=VALUE words: ReqNodeNotAvail,_Reserved_for_maintenance.
	k.str("Reason", strings.ReplaceAll(reasonOf(j), " ", "_"))
	k.str("Dependency", orNull(dependencyOf(j)))
	k.newLine()
	k.int("Requeue", boolInt(j.Spec.Requeue))
	k.int("Restarts", int64(j.Restarts))
	k.str("BatchFlag", "1")
	k.str("ExitCode", strconv.Itoa(j.ExitCode)+":"+strconv.Itoa(j.Signal))
	k.newLine()
	showJobMigration(k, j)
	if j.CPUSeconds > 0 || j.PeakMemKB > 0 {
		k.key("TotalCPU")
		k.buf = appendLongSecs(k.buf, int64(j.CPUSeconds+0.5))
		k.str("MaxRSS", strconv.FormatInt(j.PeakMemKB, 10)+"K")
		k.newLine()
	}
	if j.VMStart != "" {
		k.str("VMStart", j.VMStart)
		k.newLine()
	}
	k.key("RunTime")
	k.buf = appendLongSecs(k.buf, elapsedSecs(j, now))
	k.key("TimeLimit")
	if j.Spec.TimeLimit > 0 {
		k.buf = appendLongSecs(k.buf, j.Spec.TimeLimit)
	} else {
		k.buf = append(k.buf, "UNLIMITED"...)
	}
	showJobTimes(k, j)
	showJobResources(k, j)
	showJobFiles(k, j)
	k.done(w)
}

// showJobMigration writes whether the job's run could live-migrate, and
// why not, when the controllers know (corral's own line; Slurm has none).
func showJobMigration(k *kvWriter, j *api.Job) {
	switch j.Migratable {
	case "yes":
		k.str("Migratable", "Yes")
	case "no":
		k.str("Migratable", "No")
		k.str("MigrationBlocker", j.MigrationBlocker)
	default:
		showMigrations(k, j)
		return
	}
	k.newLine()
	showMigrations(k, j)
}

// showMigrations writes one line per live migration of the job: its
// nodes, phase, cause and who asked, and figures (or why it was aborted),
// and a line for its checkpoint.
func showMigrations(k *kvWriter, j *api.Job) {
	if ck := j.Checkpoint; ck != nil {
		k.str("Checkpoint", ck.Phase)
		k.str("CheckpointNode", ck.Node)
		if ck.By != "" {
			k.str("CheckpointBy", ck.By)
		}
		if ck.Path != "" {
			k.str("CheckpointFile", ck.Path)
			k.str("CheckpointBytes", strconv.FormatInt(ck.Size, 10))
		}
		if ck.SaveMS > 0 {
			k.str("SaveTime", strconv.FormatInt(ck.SaveMS, 10)+"ms")
		}
		if ck.RestoreMS > 0 {
			k.str("RestoreTime", strconv.FormatInt(ck.RestoreMS, 10)+"ms")
		}
		if ck.Error != "" {
			k.str("Error", ck.Error)
		}
		k.newLine()
	}
	for _, m := range j.Migrations {
		k.str("Migration", strconv.FormatUint(m.ID, 10))
		k.str("From", m.From)
		k.str("To", orNull(m.To))
		k.str("Phase", m.Phase)
		k.str("Cause", m.Cause)
		if m.By != "" {
			k.str("By", m.By) // the user, the drained node, or the preemptor
		}
		if m.TotalMS > 0 {
			k.str("TotalTime", strconv.FormatInt(m.TotalMS, 10)+"ms")
		}
		if m.Phase == "switchover" || m.Phase == "released" {
			k.str("Downtime", strconv.FormatInt(m.DowntimeMS, 10)+"ms")
			k.str("Bytes", strconv.FormatInt(m.Bytes, 10))
		}
		if m.Error != "" {
			k.str("Error", m.Error)
		}
		k.newLine()
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// showJobTimes writes the submit, eligible, start and end times.
func showJobTimes(k *kvWriter, j *api.Job) {
	k.newLine()
	k.time("SubmitTime", j.SubmitTime, "Unknown")
	k.time("EligibleTime", eligibleTime(j), "Unknown")
	k.newLine()
	start := j.StartTime
	if pendingLike(j.State) {
		start = time.Time{}
	}
	k.time("StartTime", start, "Unknown")
	end, _ := expectedEnd(j)
	k.time("EndTime", end, "Unknown")
	k.newLine()
	suspended := time.Time{}
	if j.State == api.StateSuspended {
		suspended = j.SuspendTime
	}
	k.time("SuspendTime", suspended, "None")
	k.int("SecsSuspended", int64(j.SuspendedFor/time.Second))
}

// eligibleTime is when the job could first start: unknown while it is held
// or waits on dependencies, else its --begin time or its submission.
func eligibleTime(j *api.Job) time.Time {
	switch j.Reason {
	case api.ReasonJobHeldUser, api.ReasonJobHeldAdmin, api.ReasonDependency,
		api.ReasonDependencyNeverSatisfied:
		if pendingLike(j.State) {
			return time.Time{}
		}
	}
	if j.Spec.Begin.After(j.SubmitTime) {
		return j.Spec.Begin
	}
	return j.SubmitTime
}

// showJobResources writes where the job runs and what it holds.
func showJobResources(k *kvWriter, j *api.Job) {
	nodes := j.Node
	if pendingLike(j.State) {
		nodes = ""
	}
	k.newLine()
	k.str("Partition", partitionOf(j))
	k.str("NodeList", orNull(nodes))
	if nodes != "" {
		k.newLine()
		k.str("BatchHost", nodes)
	}
	k.newLine()
	lo, hi := j.Spec.NodeRange()
	k.str("NumNodes", nodeRangeText(lo, hi))
	k.int("NumCPUs", int64(cpusOf(j)))
	k.int("NumTasks", int64(max(api.TasksOn(j.Spec.NTasks, j.Spec.NTasksPerNode, lo), 1)))
	k.int("CPUs/Task", int64(max(j.Spec.CPUsPerTask, 1)))
	if j.Spec.NTasksPerNode > 0 {
		k.int("NtasksPerNode", int64(j.Spec.NTasksPerNode))
	}
	k.newLine()
	k.str("ReqNodeList", orNull(j.Spec.NodeList))
	k.str("ExcNodeList", orNull(j.Spec.Exclude))
	k.newLine()
	k.str("Features", orNull(j.Spec.Constraint))
	k.str("OverSubscribe", map[bool]string{true: "NO", false: "OK"}[j.Spec.Exclusive])
	k.int("Contiguous", boolInt(j.Spec.Contiguous))
	if j.Spec.Distribution != "" || j.Spec.SpreadJob {
		k.str("Distribution", orNull(j.Spec.Distribution))
		k.int("SpreadJob", boolInt(j.Spec.SpreadJob))
	}
	if p := j.Placement; p != nil {
		k.newLine()
		k.str("CPU_IDs", intRanges(p.CPUs))
		k.str("NUMANodes", intRanges(p.NUMANodes))
		k.int("PlacementScore", int64(p.Score))
		var mem []string
		for _, m := range p.Mem {
			mem = append(mem, fmt.Sprintf("%d:%dM", m.Node, m.MB))
		}
		k.str("MemByNode", orNull(strings.Join(mem, ",")))
		if len(p.GPUs)+len(p.MIG) > 0 {
			k.newLine()
			k.str("GPUs", strings.Join(append(append([]string(nil), p.GPUs...), p.MIG...), ","))
		}
		if len(p.VFs) > 0 {
			k.newLine()
			k.str("VFs", strings.Join(p.VFs, ","))
		}
		if len(p.Hugepages) > 0 {
			var hp []string
			for _, h := range p.Hugepages {
				hp = append(hp, fmt.Sprintf("%d:%dK*%d", h.Node, h.SizeKB, h.Count))
			}
			k.newLine()
			k.str("Hugepages", strings.Join(hp, ","))
		}
	}
	tres := jobTRES(j)
	k.newLine()
	k.str("ReqTRES", tres)
	k.newLine()
	if nodes == "" {
		tres = ""
	}
	k.str("AllocTRES", orNull(tres))
	k.newLine()
	if j.Spec.MemPerNode == 0 && j.Spec.MemPerCPU > 0 {
		k.key("MinMemoryCPU")
		k.buf = appendMemMB(k.buf, j.Spec.MemPerCPU)
	} else {
		k.key("MinMemoryNode")
		k.buf = appendMemMB(k.buf, memOf(j))
	}
	k.key("MinTmpDiskNode")
	k.buf = appendMemMB(k.buf, j.Spec.TmpMB)
	k.newLine()
	k.str("Gres", orNull(string(appendGres(nil, j.Spec.Gres))))
	k.str("Licenses", orNull(api.FormatLicenses(j.Spec.Licenses)))
	k.str("Array", orNull(arrayOf(j)))
	if j.Spec.Image != "" {
		k.str("Image", j.Spec.Image)
	}
	if j.Spec.Reservation != "" {
		k.newLine()
		k.str("Reservation", j.Spec.Reservation)
	}
}

// nodeRangeText is a node count, or MIN-MAX for a range.
func nodeRangeText(lo, hi int) string {
	if hi > lo {
		return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
	}
	return strconv.Itoa(lo)
}

// jobTRES is scontrol's TRES string: cpu=4,mem=1G,node=1[,gres/gpu=2].
func jobTRES(j *api.Job) string {
	b := []byte("cpu=")
	b = strconv.AppendInt(b, int64(cpusOf(j)), 10)
	if mem := memOf(j); mem > 0 {
		b = append(b, ",mem="...)
		b = appendMemMB(b, mem)
	}
	lo, _ := j.Spec.NodeRange()
	b = append(b, ",node="...)
	b = strconv.AppendInt(b, int64(lo), 10)
	for _, g := range j.Spec.Gres {
		b = append(b, ",gres/"...)
		b = append(b, g.Name...)
		if g.Type != "" {
			b = append(b, ':')
			b = append(b, g.Type...)
		}
		b = append(b, '=')
		b = strconv.AppendInt(b, int64(g.Count), 10)
	}
	return string(b)
}

// showJobFiles writes the command, directories and standard streams, then
// the comment and corral's explanation of an abnormal end.
func showJobFiles(k *kvWriter, j *api.Job) {
	k.newLine()
	k.str("Command", commandOf(j))
	k.newLine()
	k.str("WorkDir", orNull(j.Spec.WorkDir))
	k.newLine()
	k.str("StdErr", stderrOf(j))
	k.newLine()
	k.str("StdIn", "/dev/null")
	k.newLine()
	k.str("StdOut", stdoutOf(j))
	k.newLine()
	k.str("Comment", orNull(j.Spec.Comment))
	if len(j.Spec.MailType) > 0 {
		k.newLine()
		k.str("MailUser", api.MailRecipient(j.Spec.MailUser, j.Spec.User, ""))
		k.str("MailType", strings.Join(j.Spec.MailType, ","))
	}
	if j.Message != "" {
		k.newLine()
		k.str("Message", j.Message)
	}
}

// nodeStateFull is scontrol's node State: the base state, with +DRAIN when
// an operator drained the node (IDLE+DRAIN is sinfo's drained,
// MIXED+DRAIN and ALLOCATED+DRAIN its draining).
func nodeStateFull(n *api.Node) string {
	var base string
	switch {
	case n.Down:
		base = string(api.NodeDown)
	case n.Probing:
		base = string(api.NodeUnknown) // its runner is testing the host
	case n.AllocCPUs == 0:
		base = string(api.NodeIdle)
	case n.AllocCPUs >= n.CPUs:
		base = string(api.NodeAllocated)
	default:
		base = string(api.NodeMixed)
	}
	if n.Drain {
		base += "+DRAIN"
	}
	if n.Maint {
		base += "+MAINT"
	}
	if len(n.Reservations) > 0 {
		base += "+RESERVED"
	}
	return base
}

// ShowNode renders one node like `scontrol show node`, with corral's runner,
// images and accelerator. now measures how long ago the node was last heard
// from (HeartbeatAge); times are shown in now's location.
func ShowNode(w io.Writer, n *api.Node, now time.Time) {
	k := &kvWriter{loc: now.Location()}
	k.newLine()
	k.str("NodeName", n.Name)
	if n.Version != "" {
		k.str("Version", n.Version)
	}
	k.newLine()
	k.int("CPUAlloc", int64(n.AllocCPUs))
	k.int("CPUTot", int64(n.CPUs))
	k.newLine()
	k.int("RealMemory", n.MemMB)
	k.int("AllocMem", n.AllocMemMB)
	k.int("FreeMem", n.FreeMemMB())
	k.newLine()
	k.str("State", nodeStateFull(n))
	k.str("ThreadsPerCore", "1")
	k.int("TmpDisk", n.TmpMB)
	k.str("Weight", "1")
	k.newLine()
	k.str("Partitions", orNull(strings.Join(n.Partitions, ",")))
	k.newLine()
	// Slurm's changeable features are not corral's: what a node has is
	// what it has, so both lines show the active list.
	k.str("AvailableFeatures", orNull(strings.Join(n.ActiveFeatures, ",")))
	k.newLine()
	k.str("ActiveFeatures", orNull(strings.Join(n.ActiveFeatures, ",")))
	if n.FeaturesBy != "" {
		k.str("FeaturesSetBy", n.FeaturesBy)
		k.str("ReportedFeatures", orNull(strings.Join(n.Features, ",")))
	}
	k.newLine()
	k.str("Runner", orNull(n.Runner))
	if len(n.Images) > 0 {
		k.str("Images", strings.Join(n.Images, ","))
	}
	if n.Accel != "" {
		k.str("Accel", n.Accel)
	}
	k.newLine()
	k.time("SlurmdStartTime", n.Registered, "None")
	k.time("LastSeen", n.LastSeen, "None")
	k.key("HeartbeatAge")
	if n.LastSeen.IsZero() {
		k.buf = append(k.buf, "N/A"...)
	} else {
		k.buf = appendLongSecs(k.buf, max(int64(now.Sub(n.LastSeen)/time.Second), 0))
	}
	showInventory(k, n.Inventory)
	k.newLine()
	k.str("Jobs", orNull(jobList(n.Jobs)))
	if n.Reason != "" {
		k.newLine()
		k.str("Reason", n.Reason)
		// As scontrol: who set the reason and when, "[root@2024-03-01T10:00:00]".
		if !n.ReasonTime.IsZero() {
			k.buf = append(k.buf, " ["...)
			k.buf = appendSafe(k.buf, reasonUser(n))
			k.buf = append(k.buf, '@')
			k.buf = appendTime(k.buf, n.ReasonTime, k.loc, "Unknown")
			k.buf = append(k.buf, ']')
		}
	}
	if n.DrainMigrate {
		k.newLine()
		k.str("DrainMigrate", "Yes")
		if n.DrainNote != "" {
			k.str("DrainWaits", n.DrainNote)
		}
	}
	k.done(w)
}

// showInventory writes a node's NUMA nodes (CPUs, memory, hugepages), the
// distances between them, its GPUs (NUMA node, MIG slices) and VFs.
func showInventory(k *kvWriter, inv *api.Inventory) {
	if inv == nil {
		return
	}
	if t := inv.Topology; t != nil {
		k.newLine()
		k.int("Sockets", int64(t.Sockets))
		k.int("NUMANodes", int64(len(t.Nodes)))
		var rows []string
		for _, d := range t.Distances {
			rows = append(rows, intList(d))
		}
		k.str("Distances", strings.Join(rows, ";"))
		for _, nd := range t.Nodes {
			ids := make([]int, len(nd.CPUs))
			for i, c := range nd.CPUs {
				ids[i] = c.ID
			}
			k.newLine()
			k.str("NUMA", strconv.Itoa(nd.ID))
			k.str("CPUs", intRanges(ids))
			k.str("Mem", fmt.Sprintf("%dM", nd.MemMB))
			k.str("FreeMem", fmt.Sprintf("%dM", nd.FreeMB))
			var hp []string
			for _, size := range sortedSizes(nd.Hugepages) {
				h := nd.Hugepages[size]
				hp = append(hp, fmt.Sprintf("%dK:%d/%d", size, h.Free, h.Total))
			}
			k.str("Hugepages", orNull(strings.Join(hp, ",")))
		}
	}
	for _, g := range inv.GPUs {
		k.newLine()
		k.str("GPU", strconv.Itoa(g.Index))
		k.str("UUID", g.UUID)
		k.str("Model", g.Model)
		k.str("NUMA", strconv.Itoa(g.NUMANode))
		k.str("Bus", orNull(g.PCIBusID))
		if g.MIGEnabled {
			var mig []string
			for _, m := range g.MIG {
				mig = append(mig, m.Profile+"("+m.UUID+")")
			}
			k.str("MIG", orNull(strings.Join(mig, ",")))
		}
	}
	for _, pf := range inv.PFs {
		var vfs []string
		for _, vf := range pf.VFs {
			vfs = append(vfs, vf.Addr)
		}
		k.newLine()
		k.str("PF", pf.Addr)
		k.str("NUMA", strconv.Itoa(pf.NUMANode))
		k.str("VFs", orNull(strings.Join(vfs, ",")))
	}
}

func sortedSizes(m map[int64]api.Hugepages) []int64 {
	out := make([]int64, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}

// intRanges writes sorted ids compactly: 0-3,8,10-11.
func intRanges(ids []int) string {
	s := slices.Sorted(slices.Values(ids))
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, strconv.Itoa(s[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func jobList(ids []uint64) string {
	var b []byte
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, id, 10)
	}
	return string(b)
}

// ShowPartition writes one partition the way scontrol show partition does.
func ShowPartition(w io.Writer, p *api.Partition) {
	k := &kvWriter{loc: time.UTC}
	all := func(list []string) string {
		if len(list) == 0 {
			return "ALL"
		}
		return strings.Join(list, ",")
	}
	yes := func(b bool) string {
		if b {
			return "YES"
		}
		return "NO"
	}
	limit := func(secs int64) string {
		if secs <= 0 {
			return "UNLIMITED"
		}
		return string(appendLongSecs(nil, secs))
	}
	state := string(p.State)
	if state == "" {
		state = string(api.PartitionUp)
	}
	k.newLine()
	k.str("PartitionName", p.Name)
	k.newLine()
	k.str("AllowAccounts", all(p.AllowAccounts))
	k.str("DenyAccounts", orNull(strings.Join(p.DenyAccounts, ",")))
	k.str("AllowQos", all(p.AllowQos))
	k.newLine()
	k.str("Default", yes(p.Default))
	k.str("QueueUnfit", yes(p.QueueUnfit))
	k.newLine()
	k.str("DefaultTime", limit(p.DefaultTime))
	k.str("MaxTime", limit(p.MaxTime))
	k.newLine()
	maxNodes := "UNLIMITED"
	if p.MaxNodes > 0 {
		maxNodes = strconv.Itoa(p.MaxNodes)
	}
	k.str("MaxNodes", maxNodes)
	k.int("MinNodes", int64(max(p.MinNodes, 0)))
	k.newLine()
	k.str("Nodes", orNull(hostlist.Compress(p.Nodes)))
	k.newLine()
	k.int("PriorityTier", int64(p.PriorityTier))
	// Jobs never share CPUs: sbatch -s warns that this wins over it.
	k.str("OverSubscribe", "NO")
	mode := string(p.PreemptMode)
	if mode == "" {
		mode = "OFF"
	}
	k.str("PreemptMode", strings.ToUpper(mode))
	k.str("State", state)
	k.int("TotalNodes", int64(len(p.Nodes)))
	k.newLine()
	// What the partition's job VMs see: corral's own settings.
	share := p.Share
	if share == "" {
		share = "nfs"
	}
	network := p.Network
	if network == "" {
		network = "none"
	}
	k.str("SharedPaths", orNull(strings.Join(p.SharedPaths, ",")))
	k.str("Share", share)
	k.str("Network", network)
	warm := p.Warm
	if warm == "" {
		warm = api.WarmYes
	}
	k.str("Warm", warm)
	k.done(w)
}
