package noded

import (
	"context"
	"errors"
	"net"
	"time"

	"corral/api"
	"corral/internal/ident"
)

// Runner starts jobs and re-attaches to the jobs an earlier daemon started.
// The process runner runs a job as a process tree on the host; the vm runner
// runs it inside a virtual machine. Both keep what they need to re-attach in
// the job's state directory and nowhere else.
type Runner interface {
	// Name is what the node reports as its runner ("process").
	Name() string
	// Start launches the job with its state directory spec.Dir (created by
	// the daemon, private to this allocation), the full environment
	// spec.Env, and stdout/stderr paths already expanded. It returns once
	// the job is running; an error means the job did not start, and its
	// text is shown to the user.
	Start(ctx context.Context, spec LaunchSpec) (Handle, error)
	// Recover re-attaches to a job an earlier daemon started in dir. It
	// returns an error wrapping ErrGone when nothing is left to attach to;
	// if the job ended while nobody watched, its result is in the returned
	// Result, which is nil when nothing is known.
	Recover(dir string) (Handle, *Result, error)
}

// ReusableState is implemented by a Runner whose files in a state directory
// keep two rules, which let the daemon write fewer files per job:
//
//   - An empty file means what no file means. The daemon then reuses an
//     acknowledged run's directory for the next run with its files emptied
//     (see runDirs); the runner had better write its files in place rather
//     than truncate them first (see procref.WriteInPlace).
//   - For a job that ended with a Result without Message, Recover returns
//     that same Result. The daemon then does not write such a run's report
//     to disk (see Daemon.finish).
//
// For any other runner each run gets a new directory and every report is
// written to disk.
type ReusableState interface {
	// ReusableState does nothing: implementing it says the rules hold.
	ReusableState()
}

// Prober is implemented by a runner that must test the host before it
// starts jobs: the vm runner boots a test guest to choose its accelerator
// and to measure QEMU's memory per VM, which takes seconds under TCG and
// longer on a loaded node. The daemon does not wait for it: it re-adopts its
// jobs, registers as not ready for new work (api.NodeInfo.Probing) and
// heartbeats, so that the jobs an earlier daemon left keep their lease, and
// runs Probe in the background; when Probe succeeds it registers again,
// ready, and starts runs. What Probe found holds until the host reboots or
// what it tested changes: the daemon records it in its data directory, and a
// later daemon on the same boot whose runner has the same ProbeKey hands it
// to Restore and probes not at all.
type Prober interface {
	// ProbeKey names what the probe's outcome depends on besides the
	// host's boot (the runner's program, its emulator, the image it boots).
	// It is cheap: the daemon asks it at every start.
	ProbeKey() string
	// Probe tests the host and returns what it found as a JSON value,
	// which Restore reads. A runner that already probed returns what it found at once.
	// Until Probe or Restore succeeded the runner starts no job; Recover
	// works before.
	Probe(ctx context.Context) ([]byte, error)
	// Restore adopts what an earlier Probe with the same ProbeKey found on
	// this boot. An error (a record it cannot read) makes the daemon probe.
	Restore(found []byte) error
}

// GuestSteps is implemented by a runner whose jobs run where the node's
// loopback is not theirs (a VM's guest): they reach the node's step
// forwarder at GuestStepURL, which each run's handle serves (StepServer).
type GuestSteps interface {
	GuestStepURL() string
}

// StepServer is implemented by the handle of a run that reaches its node
// at an address of its own: ListenSteps opens the listener there, which
// only that run reaches.
type StepServer interface {
	ListenSteps() (net.Listener, error)
}

// LaunchSpec is everything a runner needs to start one job.
type LaunchSpec struct {
	Job *api.Job
	// Dir is the allocation's state directory.
	Dir string
	// Env is the job's whole environment, KEY=VALUE.
	Env []string
	// Stdout and Stderr are the output paths on the node; equal paths
	// share one file description. AppendOutput appends to them instead
	// of truncating them (sbatch --open-mode=append).
	Stdout, Stderr string
	AppendOutput   bool
	// Stdin is the file the job's script reads as its standard input
	// (sbatch -i), opened as the job's user; "" is /dev/null.
	Stdin string
	// Rlimits are the soft resource limits the job's processes get
	// (sbatch --propagate).
	Rlimits []api.Rlimit
	Script  string
	Args    []string
	// WorkDir is the directory the job runs in; it must exist.
	WorkDir string
	// User is whom the job runs as: the job's user as the node knows it, or
	// the daemon's own (Config.RunJobsAs). Runners never run a job as
	// anyone else.
	User ident.User
	// Shares are the host directories the job works in, besides its root:
	// its working and submit directories, its home, and its partition's
	// shared paths, absolute, cleaned and without duplicates. The process
	// runner needs none of it (the job sees the host); the vm runner
	// mounts them read-write at the same paths in the guest.
	Shares []string
	// Share is how the vm runner shares the host's files with the guest:
	// "virtiofs" (fast, but QEMU cannot migrate the VM) for a job that
	// asked --no-migrate or whose partition says so, else "nfs" or ""
	// (the runner's default, the migratable NFS share). The daemon sets
	// it with api.Partition.ShareFor, the rule the controllers also say
	// from whether the job's VM could migrate.
	Share string
	// Root is the host directory the guest gets as its root instead of
	// the node's / (the partition's root setting); "" for the node's.
	Root string
	// Network is the guest's outbound network, the partition's setting:
	// "node" (the site's network, through the node) or "none"/"" (its
	// own file server only).
	Network string
	// NoWarm makes the vm runner boot the job's VM rather than restore it
	// from a warm start's snapshot: the job asked --no-warm, or its
	// partition's Warm setting says no.
	NoWarm bool
}

// Handle is a running job.
type Handle interface {
	// Wait blocks until the job has ended and returns its result. It may be
	// called more than once and from several goroutines.
	Wait() Result
	// Kill asks the job to stop: SIGTERM to all of its processes at once,
	// SIGKILL to whatever is left after grace. It returns at once and is
	// idempotent; Wait tells when the job is gone.
	Kill(grace time.Duration)
}

// Pausable is implemented by a Handle whose job can be suspended (Slurm's
// scontrol suspend) and resumed. Pause and Continue are idempotent; a paused
// job's Kill still ends it. Both runners' handles implement it: the process
// runner stops and continues the job's session with SIGSTOP and SIGCONT, the
// vm runner stops and continues the VM over QMP.
type Pausable interface {
	Pause() error
	Continue() error
}

// PauseReporter is implemented by a Handle that can tell whether its job is
// paused; a restarted daemon asks it rather than trust its record alone,
// which a crash between pausing and recording may have left behind.
type PauseReporter interface {
	Paused() (bool, error)
}

// JobNetFollower is implemented by a Handle whose job is on a multi-node
// job's private network (api.JobNet): the daemon hands it the network
// again when the controllers changed it while the job runs (a member's
// node moved its endpoint). The job's own segment and address do not
// change.
type JobNetFollower interface {
	SetJobNet(n *api.JobNet) error
}

// UsageReporter is implemented by a Handle whose runner measures what the
// job used; Usage is called once the job has ended (Wait returned) and
// reports false when nothing was measured.
type UsageReporter interface {
	Usage() (cpu time.Duration, peakBytes int64, ok bool)
}

// Closer is implemented by a Runner with background work of its own (the
// vm runner makes warm starts' snapshots): Run calls Close as the daemon
// stops, and Close returns once that work has stopped and cleaned up. Jobs
// are not its business: they run on, as Run leaves them.
type Closer interface {
	Close()
}

// WarmReporter is implemented by a Handle of a runner that can start a
// job's VM warm, restored from a snapshot of a guest booted earlier,
// rather than boot it; the daemon reports which with the job's end.
type WarmReporter interface {
	StartedWarm() bool
}

// Result is how a job ended. A job that exited has ExitCode set; one killed
// by a signal has Signal set (Slurm shows that as ExitCode 0:Signal). A
// non-empty Message means the job's end was abnormal in a way its exit
// status does not tell (it could not start, or its status was lost).
type Result struct {
	ExitCode int
	Signal   int
	OOM      bool
	Message  string
}

// ErrGone is wrapped by Recover's error when a job has nothing left to
// attach to.
var ErrGone = errors.New("job is gone")
