package vmrun

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"corral/api"
	"corral/noded"
	"corral/noded/cgroup"
	"corral/noded/vmnet"
	"corral/vmimage"

	"corral/internal/procref"

	"golang.org/x/sys/unix"
)

// Files the vm runner keeps in a job's state directory. The daemon removes
// the directory; the runner removes the socket and the initrd itself as soon
// as the VM is gone, since they are the big or live ones.
const (
	stateFile   = "vm.json"     // vmState: what Recover needs
	initrdFile  = "job.initrd"  // base initramfs + the job's payload
	consoleFile = "console.log" // the guest kernel's console (ttyS0)
	controlFile = "control"     // the guest init's control lines (ttyS3)
	qemuLogFile = "qemu.log"    // QEMU's own stdout and stderr
	qmpFile     = "qmp.sock"    // the QMP monitor socket
	killedFile  = "killed"      // written by Kill before it stops the VM
	vfsSockFile = "virtiofs.sock"
	agentFile   = "agent.sock" // the guest agent's channel (agent.go)
	vfsLogFile  = "virtiofsd.log"
)

// Limits of a job VM's shape.
const (
	// defaultMemMB is the guest RAM of a job that asked for no memory: a VM
	// needs a size, and a node's whole memory is no sensible default.
	defaultMemMB = 512
	// minMemMB is the smallest guest RAM the default image boots in: the
	// kernel unpacks the initramfs into RAM and panics below about 80 MiB.
	minMemMB = 96
	// maxSockPath is the longest path a Unix socket can have.
	maxSockPath = 107
	// monitorWait bounds how long Start waits for QEMU's monitor.
	monitorWait = 30 * time.Second
)

// guestPath is the PATH a job gets when its environment has none: without
// one the script could run nothing but shell builtins.
const guestPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// vmState is vm.json. Pid and start time together name one process on one
// boot; a pid alone may be reused.
type vmState struct {
	PID    int      `json:"pid"`
	Start  uint64   `json:"start_ticks"`
	BootID string   `json:"boot_id"`
	QMP    string   `json:"qmp"`
	Initrd string   `json:"initrd"`
	Image  string   `json:"image"`
	Accel  string   `json:"accel"`
	Argv   []string `json:"argv"`
	// Cgroup names the VM's cgroup; empty when it has none.
	Cgroup string `json:"cgroup,omitempty"`
	// Agent is the guest agent's socket; empty when the VM has none.
	Agent string `json:"agent,omitempty"`
	// As is whom QEMU runs as (identity.go); its uid stays taken while
	// the VM runs, across daemon restarts.
	As qemuIdentity `json:"qemu_as"`
	// Warm names the snapshot the VM was restored from (warmstart.go);
	// empty when it booted. WarmJobIn says the guest took its job: a VM
	// found without it is one whose daemon stopped in between
	// (abandonRestore).
	Warm      string `json:"warm,omitempty"`
	WarmJobIn bool   `json:"warm_job_in,omitempty"`
	// Incoming says QEMU was started as a live migration's destination
	// (destination.go): stopped until the daemon continues it.
	Incoming bool `json:"incoming,omitempty"`
}

// vmFiles are the absolute paths of one VM's files.
type vmFiles struct {
	dir, state, initrd, console, control, qemuLog, qmp, killed string
	vfsSock, virtiofsdLog, agentSock                           string
}

func filesIn(dir string) vmFiles {
	j := func(n string) string { return filepath.Join(dir, n) }
	return vmFiles{dir: dir, state: j(stateFile), initrd: j(initrdFile), console: j(consoleFile),
		control: j(controlFile), qemuLog: j(qemuLogFile), qmp: j(qmpFile), killed: j(killedFile),
		vfsSock: j(vfsSockFile), virtiofsdLog: j(vfsLogFile), agentSock: j(agentFile)}
}

// Start boots the job's VM and returns once QEMU's monitor answers: the
// guest is then booting, and output follows in about a second under TCG.
// An error means no VM is left running; its text is shown to the user.
func (r *Runner) Start(ctx context.Context, spec noded.LaunchSpec) (noded.Handle, error) {
	accel := r.Accel()
	if accel == "" {
		return nil, errors.New("vm runner: no VM starts before the accelerator probe is done (the node daemon probes after it registered; see its log)")
	}
	if v := r.startWarm(ctx, spec, accel); v != nil {
		return v, nil
	}
	v, err := r.start(ctx, spec, startOpts{accel: accel, hostRoot: true, group: true, agent: true})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// startOpts are what Start and the accelerator probe boot differently.
type startOpts struct {
	accel string
	// hostRoot gives the job the host's tree as its root when its image
	// can (vmimage.Image.HostRoot); the probe boots the bare initramfs.
	hostRoot bool
	// group puts the VM in a cgroup of its own (when the host has them).
	group bool
	// agent attaches the guest agent's port when the image runs an agent.
	agent bool
	// keys are the NFS file server's handle keys: nil makes the job's
	// fresh; a live migration's destination takes its source's, a warm
	// start the root's of its snapshot.
	keys *handleKeys
	// warm boots the VM for a warm start's snapshot, its guest prepared
	// to this stage (warmsnap.go), its file server acting as nobody.
	warm string
	// incoming, when set, makes QEMU load the guest from a migration
	// stream instead of booting it (incoming.go); the caller waits for
	// the stream (VM.waitIncoming).
	incoming *Incoming
}

func (r *Runner) start(ctx context.Context, spec noded.LaunchSpec, o startOpts) (*VM, error) {
	accel := o.accel
	job := spec.Job
	if job == nil {
		job = &api.Job{}
	}
	img, err := r.image(job.Spec.Image)
	if err != nil {
		return nil, err
	}
	cpus, memMB, err := vmShape(job)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", spec.Dir, err)
	}
	f := filesIn(dir)
	if len(f.agentSock) > maxSockPath {
		return nil, fmt.Errorf("state directory %s is too long for the VM's sockets (at most %d bytes for %s): use a shorter state directory", dir, maxSockPath, f.agentSock)
	}
	if err := resetFiles(f); err != nil {
		return nil, fmt.Errorf("preparing the VM's files: %w", err)
	}
	as, err := r.vmIdentity(dir, accel, job)
	if err != nil {
		return nil, err
	}
	var q qemuFiles
	defer q.close() // QEMU holds its own copies
	launched := false
	defer func() {
		if !launched {
			revokeVFIO(as.VFIO)
			releaseID(as.UID, dir)
		}
	}()
	var out outputs
	// As the job's user: the files are theirs, and a directory they may
	// not write to fails the job, as on the host. QEMU inherits them open.
	// A migration's destination carries on the source's files; a job that
	// asked --open-mode=append adds to what earlier runs wrote.
	appending := o.incoming != nil && o.incoming.Appending || spec.AppendOutput
	spec.User.Do(func() error { out, err = prepareOutputs(&q, spec.Stdout, spec.Stderr, appending); return nil })
	if err != nil {
		return nil, err
	}
	var gfs *vmimage.FS
	if o.hostRoot && img.HostRoot {
		gfs = r.guestFS(spec)
		if err := checkRoot(spec.Root, gfs.Kind); err != nil {
			return nil, err
		}
	}
	if err := checkNetwork(spec.Network, gfs); err != nil {
		return nil, err
	}
	jn, guestJN, err := r.planJobNet(job)
	if err != nil {
		return nil, err
	}
	if o.incoming == nil {
		if err := writeInitrd(img, f.initrd, spec, gfs, guestJN, as); err != nil {
			return nil, err
		}
	} else if err := o.incoming.check(); err != nil {
		return nil, err
	}
	a := vmArgs{img: img, accel: accel, cpus: cpus, memMB: memMB, f: f,
		out: out, node: job.Node, placement: job.Placement, numa: job.Spec.NUMA, agent: o.agent && img.Agent,
		baseInitrd: o.incoming != nil, warm: o.warm, jobNet: jn}
	if err := q.setIncoming(o.incoming); err != nil {
		return nil, err
	}
	vfsd, nfs, err := r.prepareShare(&a, &q, spec, gfs, o)
	if err != nil {
		os.Remove(f.initrd)
		return nil, err
	}
	var grp *cgroup.Group
	if o.group && r.cg != nil {
		if grp, err = r.cg.Create(groupName(dir), r.groupLimits(job, memMB)); err != nil {
			r.log.Warn("the job's VM runs without its cgroup", "job", job.ID, "err", err)
			grp = nil
		}
	}
	v, err := r.launch(append(r.argv(a), o.incoming.args()...), &q, f, img.Name, accel, groupName(dir), grp, a.agent, as)
	q.close()        // QEMU holds its own descriptors
	a.net.closeTap() // and its own tap device
	launched = err == nil
	if err == nil && nfs != nil && o.incoming != nil && o.incoming.HoldShare {
		// The guest's file handles must stay valid: the server starts
		// with the source's key, which comes with the stream (Receive).
		v.holdNFS(nfs)
	} else if err == nil && nfs != nil {
		if err = v.startNFS(nfs, grp); err != nil {
			killProc(v.proc)
			<-v.done
		}
	}
	if err == nil && grp != nil {
		r.addToGroup(grp, job, v.st.PID, cmdPID(vfsd))
	}
	if err == nil {
		// Once QEMU's monitor answers, QEMU holds virtiofsd's socket and
		// virtiofsd ends with it.
		v, err = r.started(ctx, v, job, img, accel, cpus, memMB, dir)
	}
	if err != nil {
		if vfsd != nil {
			vfsd.Process.Kill()
		}
		leaveJobNet(r.log, r.nodeNS, dir)
		nfs.stop()
		os.Remove(f.initrd)
		return nil, err
	}
	return v, nil
}

// vmIdentity returns whom the job's VM's QEMU runs as (identity.go), with
// the VFIO groups of its passthrough devices given to it (vfio.go).
func (r *Runner) vmIdentity(dir, accel string, job *api.Job) (qemuIdentity, error) {
	as, err := r.qemuIdentityFor(dir, accel)
	if err != nil {
		return qemuIdentity{}, fmt.Errorf("the job's VM cannot run without root: %w", err)
	}
	if addrs := r.passthroughAddrs(job.Placement); len(addrs) > 0 && os.Geteuid() == 0 {
		groups, err := vfioGroups(addrs)
		if err == nil {
			err = grantVFIO(groups, as)
		}
		if err != nil {
			releaseID(as.UID, dir)
			return qemuIdentity{}, err
		}
		as.VFIO = groups
	}
	return as, nil
}

// prepareShare starts the job's share (virtiofsd, or the NFS share's
// network namespace, tap device and listener; its server starts once QEMU
// runs), puts the VM on its job's network when it has one, and opens what
// QEMU inherits into q. On an error nothing of it is left.
func (r *Runner) prepareShare(a *vmArgs, q *qemuFiles, spec noded.LaunchSpec, gfs *vmimage.FS, o startOpts) (*exec.Cmd, *nfsServer, error) {
	var vfsd *exec.Cmd
	var nfs *nfsServer
	var err error
	switch {
	case gfs != nil && gfs.Kind == vmimage.ShareVirtiofs:
		a.virtiofs = true
		vfsd, err = startVirtiofsd(a.f)
	case gfs != nil && gfs.Kind == vmimage.ShareNFS:
		if nfs, err = r.prepareNFS(a.f.dir, spec, gfs, o); err == nil {
			a.net = nfs.net
		}
	}
	if err == nil && a.jobNet != nil {
		var tap *os.File
		if tap, err = r.joinJobNet(a.f.dir, a.net, *a.jobNet); err == nil {
			q.set(fdJobTap, tap)
		}
	}
	if err == nil {
		q.set(fdTap, a.net.tapFile())
		err = openQEMUFiles(q, *a)
	}
	if err != nil {
		if vfsd != nil {
			vfsd.Process.Kill()
		}
		leaveJobNet(r.log, r.nodeNS, a.f.dir)
		nfs.stop()
		return nil, nil, err
	}
	return vfsd, nfs, nil
}

// checkRoot checks a partition's root directory (LaunchSpec.Root) before
// the VM starts: it must be a directory of the node, and only the NFS share
// can serve it (virtiofs exports the node's / and binds the shared paths
// from it).
func checkRoot(root, share string) error {
	if root == "" {
		return nil
	}
	if share != vmimage.ShareNFS {
		return fmt.Errorf("the partition's root %s needs the nfs share, and this job gets %s (it asked for --no-migrate, or its partition says share: virtiofs): submit it without --no-migrate", root, share)
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return fmt.Errorf("the partition's root %s is not a directory on this node (%v): unpack it there, or fix the partition's root", root, err)
	}
	return nil
}

// groupName names a VM's cgroup after its state directory, which is unique
// on the node.
func groupName(dir string) string {
	h := fnv.New64a()
	h.Write([]byte(dir))
	return fmt.Sprintf("vm-%016x", h.Sum64())
}

// groupSlackMB is what a VM's group may use beyond guest RAM and QEMU's
// measured overhead: virtiofsd and the page tables.
const groupSlackMB = 64

// groupLimits are a VM's cgroup limits: the CPUs and NUMA nodes of its
// placement, and its guest RAM plus QEMU's overhead plus groupSlackMB.
func (r *Runner) groupLimits(job *api.Job, memMB int64) cgroup.Limits {
	l := cgroup.Limits{MemBytes: (memMB + r.OverheadMB() + groupSlackMB) << 20}
	if p := job.Placement; p != nil {
		l.CPUs = p.CPUs
		if job.Spec.NUMA != api.NUMANone {
			l.Mems = p.NUMANodes
		}
	}
	return l
}

// addToGroup puts the VM's processes in its cgroup; a VM outside its
// group still runs the job, so a failure is logged.
func (r *Runner) addToGroup(grp *cgroup.Group, job *api.Job, pids ...int) {
	for _, pid := range pids {
		if pid > 0 {
			if err := grp.Add(pid); err != nil {
				r.log.Warn("cannot put the job's VM in its cgroup", "job", job.ID, "pid", pid, "err", err)
			}
		}
	}
}

func cmdPID(c *exec.Cmd) int {
	if c == nil || c.Process == nil {
		return 0
	}
	return c.Process.Pid
}

// started waits for a launched VM's monitor and pins its vCPUs.
func (r *Runner) started(ctx context.Context, v *VM, job *api.Job, img *vmimage.Image, accel string, cpus int, memMB int64, dir string) (*VM, error) {
	if err := v.awaitMonitor(ctx); err != nil {
		killProc(v.proc)
		<-v.done
		return nil, err
	}
	if p := job.Placement; p != nil && len(p.CPUs) > 0 {
		if err := v.pin(p.CPUs); err != nil {
			// A VM running unpinned still runs the job; say so.
			r.log.Warn("pinning the job VM's vCPUs failed", "job", job.ID, "cpus", p.CPUs, "err", err)
		}
	}
	r.log.Info("job VM started", "job", job.ID, "pid", v.st.PID, "image", img.Name, "accel", accel,
		"cpus", cpus, "mem_mb", memMB, "dir", dir)
	return v, nil
}

// vmShape returns the job's vCPUs and guest RAM: its allocation.
func vmShape(job *api.Job) (cpus int, memMB int64, err error) {
	cpus, memMB = job.CPUs, job.MemMB
	if cpus <= 0 {
		cpus = 1
	}
	if memMB <= 0 {
		memMB = defaultMemMB
	}
	if memMB < minMemMB {
		return 0, 0, fmt.Errorf("--mem=%dM is too little for a VM job: the guest kernel and its initramfs need at least %dM (ask for more, or run with --runner process)", memMB, minMemMB)
	}
	return cpus, memMB, nil
}

// resetFiles empties what an earlier run left in a reused state directory.
// QEMU appends to the console and control files (see argv), so a stale
// control line would otherwise be taken for this run's.
func resetFiles(f vmFiles) error {
	for _, p := range []string{f.console, f.control, f.qemuLog, f.killed} {
		if err := os.Truncate(p, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, p := range []string{f.qmp, f.initrd, f.agentSock} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// outputs are the files QEMU writes the job's streams to; "" discards.
type outputs struct {
	stdout, stderr string
	// shared says both streams go to one file: the VM then has no stderr
	// port and init sends stderr to ttyS1 too, so the two interleave as
	// they would on a host.
	shared bool
}

// prepareOutputs creates and truncates the output files, as Slurm does by
// default, and puts them in q for QEMU (fdStdout, fdStderr); appending
// opens them without truncating (a live migration's destination goes on
// writing what its source wrote). The daemon
// opens them, as the job's user, so that a missing directory or one the
// user may not write to fails the job with the process runner's message;
// QEMU, which runs as an id of its own that could not open them, inherits
// them open and writes with append=on, which leaves room for Slurm's
// --open-mode=append, which is this truncation left out.
func prepareOutputs(q *qemuFiles, out, errPath string, appending bool) (outputs, error) {
	o := planOutputs(out, errPath)
	for i, p := range []string{o.stdout, o.stderr} {
		if p == "" {
			continue
		}
		open := noded.OpenOutputFile
		if appending {
			open = noded.AppendOutputFile
		}
		fh, err := open(p)
		if err != nil {
			return outputs{}, err
		}
		// QEMU appends: the descriptor it inherits must say so.
		if _, err := unix.FcntlInt(fh.Fd(), unix.F_SETFL, unix.O_APPEND); err != nil {
			fh.Close()
			return outputs{}, fmt.Errorf("output file %s: %w", p, err)
		}
		q.set(fdStdout+i, fh)
	}
	return o, nil
}

// planOutputs says which of the job's streams get a file, and so a serial
// port, of their own: what prepareOutputs opens, and what the VM's device
// model has (a warm start's snapshot must have the same).
func planOutputs(out, errPath string) outputs {
	if errPath == "" {
		errPath = out
	}
	o := outputs{shared: filepath.Clean(errPath) == filepath.Clean(out)}
	if out != "" && out != os.DevNull {
		o.stdout = out
	}
	if errPath != "" && errPath != os.DevNull && !o.shared {
		o.stderr = errPath
	}
	return o
}

// jobPayload is what the guest's init gets of the job: in its initrd when
// the VM boots, over the agent when it is restored from a warm start's
// snapshot (warmstart.go).
func jobPayload(spec noded.LaunchSpec, fs *vmimage.FS, jobNet *vmimage.Net) vmimage.Payload {
	env := spec.Env
	hasPath := false
	for _, kv := range env {
		hasPath = hasPath || strings.HasPrefix(kv, "PATH=")
	}
	if !hasPath {
		env = append(append([]string(nil), env...), guestPath)
	}
	p := vmimage.Payload{Script: []byte(spec.Script), Env: env, Args: spec.Args, WorkDir: spec.WorkDir, FS: fs, Input: spec.Stdin, Net: jobNet}
	for _, l := range spec.Rlimits {
		p.Rlimits = append(p.Rlimits, vmimage.Rlimit{Name: l.Name, Value: l.Value})
	}
	if u := spec.User; u.Name != "" && u.UID != 0 {
		p.User = &vmimage.User{Name: u.Name, UID: u.UID, GID: u.GID, Groups: u.Groups, Home: u.Home}
	}
	return p
}

// writeInitrd writes the job's -initrd: the image's base initramfs and the
// job's payload.
//
// It holds the job's script and environment: only the VM's own id may read
// it (QEMU reopens it as that id, see fdPath).
func writeInitrd(img *vmimage.Image, path string, spec noded.LaunchSpec, fs *vmimage.FS, jobNet *vmimage.Net, as qemuIdentity) error {
	p := jobPayload(spec, fs, jobNet)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o400)
	if err != nil {
		return fmt.Errorf("writing the VM's initrd: %w", err)
	}
	if os.Geteuid() == 0 {
		err = fh.Chown(int(as.UID), int(as.GID))
	}
	w := bufio.NewWriterSize(fh, 256<<10)
	if err == nil {
		err = img.WriteInitrd(w, p)
	}
	if err == nil {
		err = w.Flush()
	}
	if err = errors.Join(err, fh.Close()); err != nil {
		os.Remove(path)
		return fmt.Errorf("writing the VM's initrd: %w", err)
	}
	return nil
}

// vmArgs is what the QEMU command line is made of.
type vmArgs struct {
	img   *vmimage.Image
	accel string
	cpus  int
	memMB int64
	f     vmFiles
	out   outputs
	node  string
	// placement is the job's exact set inside the node (nil: none); numa
	// its --numa policy.
	placement *api.Placement
	numa      string
	// virtiofs adds the virtiofs device of the host's tree.
	virtiofs bool
	// net adds the network card of the NFS share (nil: none).
	net *guestNet
	// jobNet adds the card of a multi-node job's network (nil: none).
	jobNet *vmnet.JobNet
	// agent adds the guest agent's port (agentArgs).
	agent bool
	// warm boots the guest for a warm start's snapshot, prepared to this
	// stage (vmimage.WarmNet, vmimage.WarmRoot; warmsnap.go): only the
	// kernel command line differs from a job's VM of the same shape.
	warm string
	// baseInitrd gives QEMU the image's base initramfs as -initrd instead
	// of the job's initrd: a VM that loads its guest from a migration
	// stream boots nothing (incoming.go).
	baseInitrd bool
}

// initrdPath is the file QEMU reads as -initrd.
func (a vmArgs) initrdPath() string {
	if a.baseInitrd {
		return a.img.Initrd
	}
	return a.f.initrd
}

// hostnameRE is what corral.hostname may hold: it goes on the kernel
// command line, where a space would split it.
var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$`)

// argv returns the QEMU command line of the host contract in vmimage's
// documentation. Every device is one QEMU can migrate (no 9p, no host
// passthrough), so that a later live migration can start the same argv on
// another node.
func (r *Runner) argv(a vmArgs) []string {
	cpu := "max"
	if a.accel == "kvm" {
		cpu = "host"
	}
	machine := "microvm"
	var backend []string
	if obj := memoryBackend(a.placement, a.numa, a.memMB, a.virtiofs); obj != "" {
		machine += ",memory-backend=ram"
		backend = []string{"-object", obj}
	}
	argv := []string{r.cfg.QEMU,
		"-M", machine, "-accel", accelArg(a.accel), "-cpu", cpu,
		"-m", strconv.FormatInt(a.memMB, 10), "-smp", strconv.Itoa(a.cpus),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		// Named threads ("CPU 0/TCG") let an operator see which host
		// thread runs which vCPU (top -H, /proc/PID/task/*/comm).
		// The name also marks the VM's QEMU as its state directory's
		// (recoverUnrecorded).
		"-name", nameArg(a.f.dir),
	}
	argv = append(argv, fdChardev("con", fdConsole)...)
	argv = append(argv, "-serial", "chardev:con")
	argv = append(argv, outputChardev("out", a.out.stdout, fdStdout)...)
	argv = append(argv, "-device", vmimage.StdoutPort.DeviceArg("out"))
	if !a.out.shared {
		argv = append(argv, outputChardev("err", a.out.stderr, fdStderr)...)
		argv = append(argv, "-device", vmimage.StderrPort.DeviceArg("err"))
	}
	argv = append(argv, fdChardev("ctl", fdControl)...)
	argv = append(argv,
		"-device", vmimage.ControlPort.DeviceArg("ctl"),
		"-chardev", socketChardev("qmp", fdQMP), "-mon", "chardev=qmp,mode=control",
		"-kernel", fdPath(fdKernel), "-initrd", fdPath(fdInitrd),
	)
	argv = append(argv, backend...)
	if a.virtiofs {
		argv = append(argv, virtiofsArgs()...)
	}
	argv = append(argv, a.net.qemuArgs()...)
	argv = append(argv, jobNetArgs(a.jobNet, a.net != nil)...)
	if a.placement != nil {
		argv = append(argv, r.passthrough(a.placement)...)
	}
	var extra []string
	if a.accel != "kvm" {
		extra = append(extra, vmimage.TCGCmdline)
	}
	if a.agent {
		argv = append(argv, agentArgs()...)
		extra = append(extra, "corral.agent=1")
	}
	if hostnameRE.MatchString(a.node) {
		extra = append(extra, "corral.hostname="+a.node)
	}
	extra = append(extra, warmCmdline(a.warm)...)
	if r.cfg.GuestDebug {
		extra = append(extra, "corral.debug=1")
	}
	return append(argv, "-append", vmimage.KernelCmdline(r.tscKHz, extra...))
}

// tcgBufferMB caps TCG's translation buffer. QEMU 7.2 reserves 1 GiB for
// it and touches it as it translates; while a VM is migrated (or saved)
// every page the guest writes invalidates the code translated from it, and
// retranslation marched through the buffer: a 256 MiB guest's QEMU grew
// by 150 MiB in 20 s of a slow stream, past its cgroup's limit, and was
// killed. A guest's working set of translated code fits this many times
// over.
const tcgBufferMB = 32

// accelArg is -accel's value: TCG with its translation buffer capped.
func accelArg(accel string) string {
	if accel == "tcg" {
		return "tcg,tb-size=" + strconv.Itoa(tcgBufferMB)
	}
	return accel
}

// outputChardev returns the chardev of an output stream: the inherited
// descriptor fd (see prepareOutputs), or one that discards when path is "".
func outputChardev(id, path string, fd int) []string {
	if path == "" {
		return []string{"-chardev", "null,id=" + id}
	}
	return fdChardev(id, fd)
}

// nameArg is the -name of the VM whose state directory is dir: it names
// the directory, the only path on QEMU's command line (QEMU opens nothing
// by path, see qemufiles.go), so that a QEMU started there can be found
// by its command line (recoverUnrecorded, an operator's pgrep -f DIR).
func nameArg(dir string) string {
	return "guest=corral:" + qemuEscape(dir) + ",debug-threads=on"
}

// qemuEscape doubles commas, which QEMU's option syntax reads as
// separators.
func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// launch starts QEMU in a session of its own, so that it outlives the
// daemon, as the unprivileged id as (startUnprivileged) with the
// descriptors q, and records it in vm.json before anything else can fail.
func (r *Runner) launch(argv []string, q *qemuFiles, f vmFiles, image, accel, group string, grp *cgroup.Group, agent bool, as qemuIdentity) (*VM, error) {
	logf, err := os.OpenFile(f.qemuLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", f.qemuLog, err)
	}
	defer logf.Close()
	cmd := &exec.Cmd{
		Path: argv[0], Args: argv, Dir: "/", // its id may not enter f.dir
		Stdout: logf, Stderr: logf, ExtraFiles: q.extra(),
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := startUnprivileged(cmd, as); err != nil {
		return nil, fmt.Errorf("starting QEMU as uid %d gid %d: %w", as.UID, as.GID, err)
	}
	pid := cmd.Process.Pid
	ps, err := procref.ReadStat(pid) // an unreaped child cannot vanish
	start := ps.Start
	var p *procref.Ref
	if err == nil {
		p, err = procref.Open(pid, start, true)
	}
	st := vmState{PID: pid, Start: start, BootID: procref.BootID(), QMP: f.qmp, Initrd: f.initrd,
		Image: image, Accel: accel, Argv: argv, As: as, Incoming: slices.Contains(argv, "-incoming")}
	if grp != nil {
		st.Cgroup = group
	}
	if agent {
		st.Agent = f.agentSock
	}
	if err == nil {
		if err = procref.WriteJSON(f.state, st); err != nil && p != nil {
			p.Close()
		}
	}
	if err != nil {
		// Without a record a restarted daemon could not find the VM, so it
		// must not run.
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("recording the job's VM: %w", err)
	}
	return r.newVM(f, st, p, cmd, grp), nil
}
