package ctld

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"

	"corral/api"
	"corral/submit"
)

// Limits of the requests other than job submissions, checked before
// anything is proposed. They are far above what a real cluster sends, and
// low enough that no request can make the leader's state, or one Raft
// entry, large.
const (
	// maxNodeNameBytes bounds a node's name; node names appear in paths on
	// the node, so NameProblem's characters only, and never "..".
	maxNodeNameBytes = 64
	// maxNodePartitions and maxNodeImages bound the lists a node
	// registers with; maxRunningJobs the jobs it says it still runs.
	maxNodePartitions = 64
	maxNodeImages     = 1000
	maxRunningJobs    = 100_000
	// Inventory bounds: NUMA nodes, GPUs (and MIG instances of one GPU),
	// SR-IOV physical functions (and VFs of one), ids.
	maxNUMANodes  = 256
	maxNUMAID     = 4095
	maxGPUs       = 1024
	maxMIG        = 64
	maxPFs        = 256
	maxVFs        = 4096
	maxSiblings   = 64
	maxSLIT       = 255 // SLIT distances are bytes; 10 is local
	maxIOMMUGroup = 1 << 20
	// maxReports bounds the job reports of one status message,
	// maxMessageBytes the message of one report; maxSignal is the largest
	// signal number (SIGRTMAX).
	maxReports      = 10_000
	maxMessageBytes = 4096
	maxSignal       = 64
	// maxIDs bounds the job ids of a cancel, hold, suspend or filter;
	// maxFilterValues the values of each of a filter's other lists.
	maxIDs          = 100_000
	maxFilterValues = 1000
	// maxShares bounds fair-share shares, maxQOSPriority a QoS's priority
	// (Slurm's are 32-bit), maxPolicyCount the counts of a QoS's limits.
	maxShares      = 1e9
	maxQOSPriority = math.MaxUint32
	maxPolicyCount = 1 << 30
)

// reqCheck collects the first problem of a request, naming its field; what
// prefixes every message ("node n1", "QoS high").
type reqCheck struct {
	what string
	err  error
}

func (c *reqCheck) fail(field, format string, args ...any) {
	if c.err == nil {
		msg := fmt.Sprintf(format, args...)
		if c.what != "" {
			msg = c.what + ": " + msg
		}
		c.err = &fieldError{Field: field, Msg: msg}
	}
}

// text refuses a value that is not one line of UTF-8 text of at most limit
// bytes (empty is allowed).
func (c *reqCheck) text(field, v string, limit int) {
	if why := submit.TextProblem(v, limit); why != "" {
		c.fail(field, "%s %q %s", field, submit.Shown(v), why)
	}
}

// name refuses a value that is not a well-formed name (submit.NameProblem).
func (c *reqCheck) name(field, v string, limit int) {
	if why := submit.NameProblem(v, limit); why != "" {
		c.fail(field, "%s %q %s", field, submit.Shown(v), why)
	}
}

// between refuses a number outside [lo, hi].
func (c *reqCheck) between(field string, v, lo, hi int64) {
	if v < lo || v > hi {
		c.fail(field, "%s=%d must be between %d and %d", field, v, lo, hi)
	}
}

// count refuses a list longer than limit.
func (c *reqCheck) count(field string, n, limit int) {
	if n > limit {
		c.fail(field, "%d entries in %s; the most is %d", n, field, limit)
	}
}

// share refuses shares that are negative, not finite or above maxShares.
func (c *reqCheck) share(field string, v float64) {
	if math.IsNaN(v) || v < 0 || v > maxShares {
		c.fail(field, "%s=%g must be a number from 0 to %g", field, v, maxShares)
	}
}

// nodeName refuses anything but a well-formed node name.
func (c *reqCheck) nodeName(field, v string) {
	c.name(field, v, maxNodeNameBytes)
	if c.err == nil && strings.Contains(v, "..") {
		c.fail(field, "%s %q must not contain \"..\"", field, v)
	}
}

// validateNodeInfo checks a registration: a well-formed name, sane CPU,
// memory and scratch space figures, well-formed partition and image names, and an inventory
// the scheduling pass can read (see validateInventory). A partition the
// controllers do not know is created by the node, as partitions exist
// implicitly (api.Partition).
func validateNodeInfo(info *api.NodeInfo) error {
	c := &reqCheck{}
	if info.Name == "" {
		c.fail("name", "node registration without a name: give --name")
		return c.err
	}
	c.nodeName("name", info.Name)
	if c.err != nil {
		return c.err
	}
	c.what = "node " + info.Name
	c.between("cpus", int64(info.CPUs), 1, submit.MaxCPUs)
	c.between("mem_mb", info.MemMB, 1, submit.MaxMemoryMiB)
	c.between("overhead_mb", info.OverheadMB, 0, max(info.MemMB, 0))
	c.between("tmp_mb", info.TmpMB, 0, submit.MaxMemoryMiB)
	c.name("runner", orDash(info.Runner), 64)
	c.text("boot_id", info.BootID, 128)
	c.text("version", info.Version, 128)
	c.text("accel", info.Accel, 64)
	if info.APIAddr != "" {
		if u, err := url.Parse(info.APIAddr); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			c.fail("api_addr", "api_addr %q is not http://HOST:PORT or https://HOST:PORT", submit.Shown(info.APIAddr))
		}
	}
	if info.Overlay != "" {
		if _, err := api.ParseOverlay(info.Overlay); err != nil {
			c.fail("overlay", "%v", err)
		}
	}
	c.count("partitions", len(info.Partitions), maxNodePartitions)
	for i, p := range info.Partitions {
		c.name("partitions", p, submit.MaxNameBytes)
		for _, q := range info.Partitions[:i] {
			if p == q {
				c.fail("partitions", "partition %s is listed twice", p)
			}
		}
	}
	c.count("images", len(info.Images), maxNodeImages)
	for _, im := range info.Images {
		c.name("images", im, submit.MaxNameBytes)
	}
	c.count("running", len(info.Running), maxRunningJobs)
	for _, id := range info.Running {
		if id == 0 {
			c.fail("running", "job id 0 does not exist")
		}
	}
	checkFeatures(c, info.Features)
	if c.err == nil && info.Inventory != nil {
		validateInventory(c, info.Inventory)
	}
	return c.err
}

// orDash lets an empty runner pass the name check (it is optional).
func orDash(s string) string {
	if s == "" {
		return "_"
	}
	return s
}

// validateInventory checks what the scheduling pass reads from a node's
// hardware: NUMA node and CPU ids unique and in range, a square distance
// matrix of positive SLIT values, non-negative bounded memory and hugepage
// figures, bounded device lists with unique device ids.
func validateInventory(c *reqCheck, inv *api.Inventory) {
	numa := map[int]bool{}
	if t := inv.Topology; t != nil {
		validateTopology(c, t, numa)
	}
	c.count("inventory.gpus", len(inv.GPUs), maxGPUs)
	c.count("inventory.pfs", len(inv.PFs), maxPFs)
	devices := map[string]bool{}
	device := func(field, id string) {
		c.text(field, id, 128)
		switch {
		case id == "":
			c.fail(field, "%s: a device needs an id", field)
		case devices[id]:
			c.fail(field, "%s: device %s is listed twice", field, id)
		}
		devices[id] = true
	}
	numaRef := func(field string, n int) { c.between(field, int64(n), -1, maxNUMAID) }
	for _, g := range inv.GPUs {
		device("inventory.gpus.uuid", g.UUID)
		c.between("inventory.gpus.index", int64(g.Index), 0, maxGPUs)
		c.text("inventory.gpus.model", g.Model, submit.MaxNameBytes)
		c.text("inventory.gpus.pci_bus_id", g.PCIBusID, 64)
		c.between("inventory.gpus.mem_mb", g.MemMB, 0, submit.MaxMemoryMiB)
		numaRef("inventory.gpus.numa_node", g.NUMANode)
		c.count("inventory.gpus.cpu_affinity", len(g.CPUAffinity), submit.MaxCPUs)
		for _, id := range g.CPUAffinity {
			c.between("inventory.gpus.cpu_affinity", int64(id), 0, submit.MaxCPUs-1)
		}
		c.count("inventory.gpus.mig", len(g.MIG), maxMIG)
		for _, m := range g.MIG {
			device("inventory.gpus.mig.uuid", m.UUID)
			c.text("inventory.gpus.mig.profile", m.Profile, 64)
			c.between("inventory.gpus.mig.mem_mb", m.MemMB, 0, submit.MaxMemoryMiB)
		}
	}
	for _, pf := range inv.PFs {
		c.text("inventory.pfs.addr", pf.Addr, 64)
		c.text("inventory.pfs.driver", pf.Driver, 64)
		numaRef("inventory.pfs.numa_node", pf.NUMANode)
		c.between("inventory.pfs.total_vfs", int64(pf.TotalVFs), 0, maxVFs)
		c.count("inventory.pfs.vfs", len(pf.VFs), maxVFs)
		for _, vf := range pf.VFs {
			device("inventory.pfs.vfs.addr", vf.Addr)
			c.text("inventory.pfs.vfs.driver", vf.Driver, 64)
			c.between("inventory.pfs.vfs.iommu_group", int64(vf.IOMMUGroup), -1, maxIOMMUGroup)
			numaRef("inventory.pfs.vfs.numa_node", vf.NUMANode)
		}
	}
}

// validateTopology checks the NUMA nodes, their CPUs, memory and
// hugepages, and the distance matrix; numa receives the NUMA node ids.
func validateTopology(c *reqCheck, t *api.Topology, numa map[int]bool) {
	c.between("inventory.topology.sockets", int64(t.Sockets), 0, submit.MaxCPUs)
	c.count("inventory.topology.nodes", len(t.Nodes), maxNUMANodes)
	if c.err != nil {
		return
	}
	cpus := map[int]bool{}
	for _, n := range t.Nodes {
		c.between("inventory.topology.nodes.id", int64(n.ID), 0, maxNUMAID)
		if numa[n.ID] {
			c.fail("inventory.topology.nodes.id", "NUMA node %d is listed twice", n.ID)
		}
		numa[n.ID] = true
		c.between("inventory.topology.nodes.mem_mb", n.MemMB, 0, submit.MaxMemoryMiB)
		c.between("inventory.topology.nodes.free_mb", n.FreeMB, 0, submit.MaxMemoryMiB)
		c.count("inventory.topology.nodes.cpus", len(n.CPUs)+len(cpus), submit.MaxCPUs)
		if c.err != nil {
			return
		}
		for _, cpu := range n.CPUs {
			c.between("inventory.topology.nodes.cpus.id", int64(cpu.ID), 0, submit.MaxCPUs-1)
			c.between("inventory.topology.nodes.cpus.core", int64(cpu.Core), 0, submit.MaxCPUs)
			c.between("inventory.topology.nodes.cpus.socket", int64(cpu.Socket), 0, submit.MaxCPUs)
			c.count("inventory.topology.nodes.cpus.siblings", len(cpu.Siblings), maxSiblings)
			for _, s := range cpu.Siblings {
				c.between("inventory.topology.nodes.cpus.siblings", int64(s), 0, submit.MaxCPUs-1)
			}
			if cpus[cpu.ID] {
				c.fail("inventory.topology.nodes.cpus.id", "CPU %d is listed twice", cpu.ID)
			}
			cpus[cpu.ID] = true
		}
		for size, h := range n.Hugepages {
			if size < 4 || size > 16<<20 || size&(size-1) != 0 {
				c.fail("inventory.topology.nodes.hugepages", "NUMA node %d: hugepage size %d KiB is not a power of two from 4 KiB to 16 GiB", n.ID, size)
				return
			}
			most := submit.MaxMemoryMiB * 1024 / size
			c.between("inventory.topology.nodes.hugepages.total", h.Total, 0, most)
			c.between("inventory.topology.nodes.hugepages.free", h.Free, 0, most)
		}
	}
	if len(t.Distances) != len(t.Nodes) {
		c.fail("inventory.topology.distances", "the distance matrix has %d rows for %d NUMA nodes; it must be square", len(t.Distances), len(t.Nodes))
		return
	}
	for i, row := range t.Distances {
		if len(row) != len(t.Nodes) {
			c.fail("inventory.topology.distances", "row %d of the distance matrix has %d entries for %d NUMA nodes; it must be square", i, len(row), len(t.Nodes))
			return
		}
		for _, d := range row {
			c.between("inventory.topology.distances", int64(d), 1, maxSLIT)
		}
	}
}

// validateNodeStatus checks a heartbeat or status message: the node's name
// and boot id, and each report's job, run, state (a terminal state),
// exit code (0..255), signal (0..64) and message.
func validateNodeStatus(st *api.NodeStatus) error {
	c := &reqCheck{}
	c.nodeName("name", st.Name)
	if c.err != nil {
		return c.err
	}
	c.what = "node " + st.Name
	c.text("boot_id", st.BootID, 128)
	c.count("reports", len(st.Reports), maxReports)
	if st.Health != nil {
		c.text("health.output", st.Health.Output, api.MaxHealthOutput)
	}
	for _, r := range st.Reports {
		checkReport(c, r)
		if c.err != nil {
			return c.err
		}
	}
	checkMigrationReports(c, st.Migrations)
	checkCheckpointReports(c, st.Checkpoints)
	return c.err
}

// checkReport checks one job report: a real job, a state a run ends in, an
// exit status and signal in range, a message of bounded size, how its VM
// started.
func checkReport(c *reqCheck, r api.JobReport) {
	if r.JobID == 0 {
		c.fail("reports.job_id", "a report names job 0, which does not exist")
	}
	if !r.State.Terminal() {
		c.fail("reports.state", "job %d: state %q is not a state a run ends in (COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY)", r.JobID, submit.Shown(string(r.State)))
	}
	c.between("reports.exit_code", int64(r.ExitCode), 0, 255)
	c.between("reports.signal", int64(r.Signal), 0, maxSignal)
	// A message may span lines (an error's output); only its size and
	// encoding are bounded.
	c.text("reports.message", strings.NewReplacer("\n", " ", "\t", " ").Replace(r.Message), maxMessageBytes)
	switch r.VMStart {
	case "", api.VMStartWarm, api.VMStartCold:
	default:
		c.fail("reports.vm_start", "job %d: vm_start %q: use %s, %s or nothing", r.JobID, submit.Shown(r.VMStart), api.VMStartWarm, api.VMStartCold)
	}
}

// validCarriedReports returns the reports of a registration that pass
// checkReport and the errors of those that do not. A registration is not
// refused for a report it carries: the daemon would register again with the
// same report forever and never serve. A dropped report is acknowledged
// with the registration, and its job is judged lost like any run the node
// neither runs nor reports.
func validCarriedReports(reps []api.JobReport) ([]api.JobReport, []error) {
	var ok []api.JobReport
	var bad []error
	for _, r := range reps {
		c := &reqCheck{what: fmt.Sprintf("job %d's report", r.JobID)}
		if checkReport(c, r); c.err != nil {
			bad = append(bad, c.err)
			continue
		}
		ok = append(ok, r)
	}
	return ok, bad
}

// validateDrain checks a drain or resume: a node name and a reason of one
// line.
func validateDrain(req *api.DrainRequest) error {
	c := &reqCheck{}
	c.nodeName("node", req.Node)
	c.text("reason", req.Reason, submit.MaxNameBytes)
	return c.err
}

// validateNodeFeatures checks an operator's features for a node: a node
// name, at most api.MaxNodeFeatures valid feature names, none given with
// Reset.
func validateNodeFeatures(req *api.NodeFeaturesRequest) error {
	c := &reqCheck{}
	c.nodeName("node", req.Node)
	if req.Reset && len(req.Features) > 0 {
		c.fail("features", "node %s: give features or reset, not both", req.Node)
	}
	checkFeatures(c, req.Features)
	return c.err
}

// checkFeatures checks a node's feature list: at most api.MaxNodeFeatures
// names, each a valid feature name.
func checkFeatures(c *reqCheck, features []string) {
	c.count("features", len(features), api.MaxNodeFeatures)
	for _, f := range features {
		if why := submit.FeatureProblem(f); why != "" {
			c.fail("features", "feature %q %s", submit.Shown(f), why)
		}
	}
}

// validateIDs checks the job ids of a hold, suspend or cancel.
func validateIDs(field string, ids []uint64) error {
	c := &reqCheck{}
	c.count(field, len(ids), maxIDs)
	for _, id := range ids {
		if id == 0 {
			c.fail(field, "job id 0 does not exist; job ids start at 1")
			break
		}
	}
	return c.err
}

// validateFilter checks a job filter from a query or a cancel request:
// bounded lists, ids, task indexes, known states and one-line names.
func validateFilter(f *api.JobFilter) error {
	if err := validateIDs("ids", f.IDs); err != nil {
		return err
	}
	c := &reqCheck{}
	c.count("tasks", len(f.Tasks), maxIDs)
	for _, t := range f.Tasks {
		if t.Array == 0 || t.Task < 0 || t.Task > submit.MaxArrayIndex {
			c.fail("tasks", "task %d_%d: arrays start at 1 and tasks are 0 to %d", t.Array, t.Task, submit.MaxArrayIndex)
		}
	}
	c.count("states", len(f.States), maxFilterValues)
	for _, st := range f.States {
		if !slices.Contains(api.AllJobStates, st) {
			c.fail("states", "unknown job state %q (use one of %v)", submit.Shown(string(st)), api.AllJobStates)
		}
	}
	for _, l := range []struct {
		field  string
		values []string
	}{{"users", f.Users}, {"names", f.Names}, {"partitions", f.Partitions}, {"accounts", f.Accounts}, {"qos", f.QOS}, {"nodes", f.Nodes}, {"reservations", f.Reservations}} {
		c.count(l.field, len(l.values), maxFilterValues)
		for _, v := range l.values {
			c.text(l.field, v, submit.MaxNameBytes)
		}
	}
	return c.err
}

// validateQOS checks a QoS's name, priority, preemption list and limits;
// the state-dependent checks (the QoS it preempts exist, a deleted one is
// unused) are state.State.CheckQOS's.
func validateQOS(q *api.QOS) error {
	c := &reqCheck{}
	c.name("name", q.Name, submit.MaxNameBytes)
	if c.err != nil {
		return c.err
	}
	c.what = "qos " + q.Name
	c.between("priority", q.Priority, 0, maxQOSPriority)
	c.count("preempt", len(q.Preempt), maxFilterValues)
	for _, p := range q.Preempt {
		c.name("preempt", p, submit.MaxNameBytes)
	}
	if q.PreemptMode != "" {
		if _, err := api.ParsePreemptMode(string(q.PreemptMode)); err != nil {
			c.fail("preempt_mode", "%v", err)
		}
	}
	if q.PreemptFallback != "" {
		if _, err := api.ParsePreemptFallback(string(q.PreemptFallback)); err != nil {
			c.fail("preempt_fallback", "%v", err)
		}
	}
	c.between("preempt_exempt_time_s", q.PreemptExemptTime, 0, submit.MaxTimeLimit)
	c.between("max_wall_s", q.MaxWall, 0, submit.MaxTimeLimit)
	c.between("max_jobs_per_user", int64(q.MaxJobsPerUser), 0, maxPolicyCount)
	c.between("max_submit_per_user", int64(q.MaxSubmitPerUser), 0, maxPolicyCount)
	c.between("grp_cpus", int64(q.GrpCPUs), 0, maxPolicyCount)
	return c.err
}

// validateAccount checks an account's name, parent and shares.
func validateAccount(a *api.Account) error {
	c := &reqCheck{}
	c.name("name", a.Name, submit.MaxNameBytes)
	if a.Parent != "" {
		c.name("parent", a.Parent, submit.MaxNameBytes)
	}
	c.share("shares", a.Shares)
	return c.err
}

// validateAccountUser checks a user's association: a user name of one
// word, an account name and shares.
func validateAccountUser(u *api.AccountUser) error {
	c := &reqCheck{}
	c.text("name", u.Name, submit.MaxNameBytes)
	if u.Name == "" || strings.ContainsAny(u.Name, " ") {
		c.fail("name", "a user needs a name without spaces")
	}
	c.name("account", u.Account, submit.MaxNameBytes)
	c.share("shares", u.Shares)
	return c.err
}

// validateSettings checks `corral config set` pairs: known names (the
// values are checked by api.SchedConfig.Set, which bounds them).
func validateSettings(settings [][2]string) error {
	c := &reqCheck{}
	c.count("settings", len(settings), 64)
	for _, kv := range settings {
		c.text("settings", kv[0], 64)
		// A mail program's path and a webhook's URL are longer than any
		// number or name; their setters check them whole.
		limit := 64
		if len(kv[0]) > 4 && strings.EqualFold(kv[0][:4], "mail") {
			limit = 4096
		}
		c.text("settings", kv[1], limit)
	}
	return c.err
}
