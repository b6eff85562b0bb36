package noded

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"corral/api"
	"corral/internal/pki"
)

// Config configures a node daemon. Zero fields take the defaults noted.
type Config struct {
	// Name is the node's name; default the host name.
	Name string
	// CPUs and MemMB are what the node offers; default HostCPUs() and
	// HostMemMB().
	CPUs  int
	MemMB int64
	// TmpMB is the size of the node's scratch file system that jobs ask
	// for with sbatch --tmp (Slurm's TmpDisk); 0 offers none.
	TmpMB int64
	// Partitions the node serves; empty leaves the choice to the
	// controllers (their default partition).
	Partitions []string
	// Features are the node's features (--features), which jobs ask for
	// with --constraint.
	Features []string
	// Inventory is the node's NUMA topology, GPUs and SR-IOV functions,
	// reported at registration; nil when not discovered.
	Inventory *api.Inventory
	// Rediscover, when set, is called every RediscoverInterval (default
	// 1m); when the inventory it returns differs from the last one (free
	// hugepages, a GPU gone), the daemon registers again to report it.
	Rediscover         func() *api.Inventory
	RediscoverInterval time.Duration
	// DataDir holds the daemon's state: jobs/<jobid>-<startindex>/ per
	// allocation. Required.
	DataDir string
	// Client talks to the controllers. Required.
	Client *api.Client
	// Runner runs the jobs; default NewProcessRunner().
	Runner Runner
	// HeartbeatInterval is the time between heartbeats; default 1s.
	HeartbeatInterval time.Duration
	// HealthCheck is the node's health check program (Slurm's
	// HealthCheckProgram), run as the daemon's user every HealthInterval
	// (default 5m) and at start: a failing one (exit status other than 0,
	// or no end within HealthTimeout, default 60s) drains the node with its
	// output as the reason, a passing one after that resumes it (health.go).
	// Empty runs none.
	HealthCheck                   string
	HealthInterval, HealthTimeout time.Duration
	// WaitTimeout is how long one blocking desired-state query may wait;
	// default 30s.
	WaitTimeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL when a job is
	// cancelled or runs out of time; default 5s (Slurm's KillWait is 30s).
	// When the node's lease runs out it is at most a fifth of the
	// controllers' node timeout (see leaseTerms).
	KillGrace time.Duration
	// RunJobsAs says whose credentials a job runs with: RunAsJobUser (the
	// default) resolves the job's user in the node's passwd and group
	// databases and refuses a user the node does not know; RunAsDaemon runs
	// every job as the daemon's own user, for development clusters and
	// tests whose submitting users do not exist on the node.
	RunJobsAs string
	// APIListen is where the job API listens (exec, signals, files and
	// output of running jobs, which the controllers proxy here; see
	// jobapi.go), host:port; empty serves none.
	APIListen string
	// StepListen is where the step forwarder listens (srun inside the
	// node's jobs reaches the controllers through it; stepfwd.go),
	// host:port on loopback; empty serves none.
	StepListen string
	// TLS, when any file is named, serves the job API over TLS with the
	// node's certificate to controller members only (their certificate of
	// the cluster's authority); the controllers' client is set up by the
	// caller (api.NewTLSClient).
	TLS pki.Files
	// MetricsListen is where GET /metrics serves the daemon's Prometheus
	// figures (metrics.go), host:port; empty serves none.
	MetricsListen string
	// CheckpointDir is where the node writes its jobs' checkpoints
	// (checkpoint.go); DataDir/checkpoints when empty. CheckpointShared
	// says the directory is shared with other nodes at the same path,
	// which may then restore the checkpoints written here.
	CheckpointDir    string
	CheckpointShared bool
	// Logger receives the daemon's log; default slog.Default(). The daemon
	// does not add the node's name: a process that runs several daemons
	// passes each a logger With("node", name).
	Logger *slog.Logger
}

// Daemon is a node daemon. Create it with New and run it with Run.
type Daemon struct {
	cfg    Config
	log    *slog.Logger
	runner Runner
	bootID string
	root   string // DataDir/jobs

	reg *registration
	rep *reporter
	// users caches the identities jobs run as (identity.go).
	users users
	lease *lease
	// inv is the inventory the daemon reports (see Config.Rediscover).
	inv  atomic.Pointer[api.Inventory]
	dirs *runDirs
	// reusable says the runner implements ReusableState.
	reusable bool
	// prober is the runner when it implements Prober; probed says its
	// probe succeeded (or was restored), and probedCh carries the
	// background probe's outcome to the loop (probe.go).
	prober   Prober
	probed   atomic.Bool
	probedCh chan error

	// Events into the loop goroutine, which alone owns the job table.
	desiredCh chan *api.Desired
	startedCh chan startedEvent
	exitedCh  chan exitedEvent
	timeoutCh chan jobKey
	warnCh    chan jobKey
	ackCh     chan []jobKey
	killAllCh chan chan struct{}
	leaseCh   chan bool // from watchLease: the lease holds (again), or ran out
	keeperCh  chan *keeperProc
	// migCh carries the ends of migration streams (migStreamed,
	// migReceived) into the loop; migRep sends migration reports.
	migCh  chan any
	migRep *migReporter
	// ckListed are the node's checkpoint files its desired state listed
	// (checkpoint.go): one no longer listed is removed at once.
	ckListed map[string]bool
	// runErr is why the loop ended before its context did (the runner's
	// probe failed); Run returns it.
	runErr error
	// loopDone is closed when Run has returned; events sent after that
	// are dropped.
	loopDone chan struct{}

	// running holds the ids of the jobs with live processes, for
	// registration.
	running atomic.Pointer[[]uint64]
	// runs are the running jobs the job API may reach (publishRuns);
	// apiURL is where it listens.
	runs   atomic.Pointer[map[uint64]*liveRun]
	apiURL atomic.Pointer[string]
	// steps are the running tasks of the jobs' steps (steps.go);
	// stepAddr is the step forwarder's URL and stepKey its key
	// (stepfwd.go).
	steps    stepSessions
	stepAddr string
	stepKey  []byte

	mu         sync.Mutex
	runCalled  bool
	killOnExit bool

	// The job table. The loop goroutine owns it while Run runs; after
	// Run returned, KillAll does, under killMu.
	jobs        map[jobKey]*localJob
	done        map[jobKey]time.Time // tombstones of reported runs
	starting    int
	stopping    bool
	deferred    bool
	lastDesired *api.Desired
	killWaiters []chan struct{}
	// leaseLost is set while the lease has run out: no run starts.
	leaseLost bool
	keeper    *keeperProc
	killMu    sync.Mutex

	// partitions caches the partitions' shared paths and shares
	// (partition).
	partitions partitionCache

	// metrics are the daemon's Prometheus figures; metricsAddr is where
	// they are served (metrics.go).
	metrics     *nodeMetrics
	metricsAddr atomic.Value
	// startTimes says the controllers take a report's StartSeconds (the
	// last registration's or heartbeat's answer said so): a controller
	// of an earlier release refuses the field.
	startTimes atomic.Bool
}

// New checks cfg, fills in its defaults and returns a daemon.
func New(cfg Config) (*Daemon, error) {
	if cfg.Client == nil {
		return nil, errors.New("noded: Config.Client is required")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("noded: Config.DataDir is required (the daemon keeps its jobs' state there)")
	}
	if cfg.Name == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, errors.New("noded: no node name given and the host name is unknown")
		}
		cfg.Name = h
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = HostCPUs()
	}
	if cfg.MemMB <= 0 {
		cfg.MemMB = HostMemMB()
	}
	if cfg.Runner == nil {
		cfg.Runner = NewProcessRunner()
	}
	if cfg.RediscoverInterval <= 0 {
		cfg.RediscoverInterval = time.Minute
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Second
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = 5 * time.Minute
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = time.Minute
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 30 * time.Second
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch cfg.RunJobsAs {
	case "":
		cfg.RunJobsAs = RunAsJobUser
	case RunAsJobUser, RunAsDaemon:
	default:
		return nil, fmt.Errorf("noded: run jobs as %q: use %s or %s", cfg.RunJobsAs, RunAsJobUser, RunAsDaemon)
	}
	var b [16]byte
	rand.Read(b[:])
	d := &Daemon{
		cfg:       cfg,
		log:       cfg.Logger,
		runner:    cfg.Runner,
		bootID:    hex.EncodeToString(b[:]),
		root:      filepath.Join(cfg.DataDir, "jobs"),
		desiredCh: make(chan *api.Desired),
		startedCh: make(chan startedEvent),
		exitedCh:  make(chan exitedEvent),
		timeoutCh: make(chan jobKey),
		warnCh:    make(chan jobKey),
		ackCh:     make(chan []jobKey, 16),
		killAllCh: make(chan chan struct{}),
		leaseCh:   make(chan bool),
		keeperCh:  make(chan *keeperProc),
		migCh:     make(chan any),
		probedCh:  make(chan error),
		loopDone:  make(chan struct{}),
		jobs:      make(map[jobKey]*localJob),
		ckListed:  make(map[string]bool),
		done:      make(map[jobKey]time.Time),
	}
	d.reg = newRegistration()
	d.rep = newReporter(d)
	d.migRep = newMigReporter(d)
	d.lease = newLease(cfg.DataDir)
	// A spare per job slot, and as many again for the runs whose reports
	// are acknowledged after their successors started.
	spares := max(4, 2*cfg.CPUs)
	if _, d.reusable = cfg.Runner.(ReusableState); !d.reusable {
		spares = 0
	}
	d.dirs = newRunDirs(d.root, spares, cfg.Logger)
	d.prober, _ = cfg.Runner.(Prober)
	d.running.Store(&[]uint64{})
	d.inv.Store(cfg.Inventory)
	d.metrics = newNodeMetrics(d)
	return d, nil
}

// BootID returns the random id this daemon registers with; it changes with
// every daemon start.
func (d *Daemon) BootID() string { return d.bootID }

// Run re-adopts the jobs an earlier daemon left in DataDir, registers,
// heartbeats, watches the desired state and reconciles until ctx ends. A
// runner that must probe the host (Prober) probes after the node registered,
// unless a probe recorded on this boot stands in; until then the node takes
// no new job. Run leaves jobs running when ctx ends, like slurmd, so that a
// restarted daemon re-adopts them, unless Shutdown(true) was called. It
// returns nil after a clean stop and the probe's error when the runner's
// probe failed. Run may be called once.
func (d *Daemon) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.runCalled {
		d.mu.Unlock()
		return errors.New("noded: Run called twice")
	}
	d.runCalled = true
	d.mu.Unlock()
	defer close(d.loopDone)
	defer d.dirs.close()

	if err := os.MkdirAll(d.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("noded: creating the data directory: %w", err)
	}
	if err := d.lease.load(); err != nil {
		d.log.Warn("cannot read the lease an earlier daemon left; the node has none until it registers", "err", err)
	}
	d.stopOldKeeper()
	if err := d.recoverJobs(); err != nil {
		return err
	}
	d.ensureKeeper()
	if d.prober != nil && d.restoreProbe() {
		d.probed.Store(true)
	}
	runCtx, cancel := context.WithCancel(ctx)
	if err := d.listenAPI(runCtx); err != nil {
		cancel()
		return err
	}
	if err := d.listenSteps(runCtx); err != nil {
		cancel()
		return err
	}
	if err := d.listenMetrics(runCtx); err != nil {
		cancel()
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { d.maintain(runCtx) })
	wg.Go(func() { d.watch(runCtx) })
	wg.Go(func() { d.rep.run(runCtx) })
	wg.Go(func() { d.migRep.run(runCtx) })
	wg.Go(func() { d.watchLease(runCtx) })
	if d.cfg.HealthCheck != "" {
		wg.Go(func() { d.healthLoop(runCtx) })
	}
	if !d.ready() {
		wg.Go(func() { d.probe(runCtx) })
	}
	d.loop(runCtx)
	cancel()
	wg.Wait()
	if c, ok := d.runner.(Closer); ok {
		c.Close()
	}

	d.drainStarts()
	d.mu.Lock()
	kill := d.killOnExit
	d.mu.Unlock()
	if kill {
		d.stopAll("the node daemon was shut down")
	} else {
		// Reports that ended just now (KillAll's, say) get one more try.
		d.flushReports()
	}
	if d.liveCount() == 0 {
		// Nothing left to guard; jobs left running keep their keeper.
		d.stopKeeper()
	}
	d.log.Info("node daemon stopped", "jobs_left_running", d.liveCount())
	return d.runErr
}

// flushReports tries once, briefly, to send the reports still pending.
func (d *Daemon) flushReports() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d.rep.flush(ctx)
}

// Shutdown sets what Run does with running jobs when its context ends:
// killJobs true kills them (and waits for them, and tries once more to
// report them), false leaves them running for the next daemon to re-adopt,
// which is the default.
func (d *Daemon) Shutdown(killJobs bool) {
	d.mu.Lock()
	d.killOnExit = killJobs
	d.mu.Unlock()
}

// KillAll kills every job of this daemon and waits for them to end. Their
// reports are sent as usual while Run runs; after Run returned they get one
// brief try and otherwise stay on disk for the next start. `corral dev`
// calls it on a clean stop. The daemon starts no job afterwards.
func (d *Daemon) KillAll() {
	d.mu.Lock()
	running := d.runCalled
	d.mu.Unlock()
	if running {
		reply := make(chan struct{})
		select {
		case d.killAllCh <- reply:
			<-reply
			return
		case <-d.loopDone:
		}
	}
	d.killMu.Lock()
	defer d.killMu.Unlock()
	if running {
		d.stopAll("the node daemon was shut down")
	}
}

// loop is the one goroutine that owns the job table: every reconcile and
// every job event runs here, one at a time.
func (d *Daemon) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case des := <-d.desiredCh:
			d.reconcile(des)
		case ev := <-d.startedCh:
			d.onStarted(ev)
		case ev := <-d.exitedCh:
			d.onExited(ev)
		case k := <-d.timeoutCh:
			d.onTimeout(k)
		case k := <-d.warnCh:
			d.onWarn(k)
		case keys := <-d.ackCh:
			d.onAcked(keys)
		case held := <-d.leaseCh:
			if held {
				d.onLeaseRenewed()
			} else {
				d.onLeaseLost()
			}
		case k := <-d.keeperCh:
			d.onKeeperExited(k)
		case ev := <-d.migCh:
			switch ev := ev.(type) {
			case migStreamed:
				d.onStreamed(ev)
			case migReceived:
				d.onReceived(ev)
			case ckSaved:
				d.onCheckpointSaved(ev)
			}
		case err := <-d.probedCh:
			if !d.onProbed(err) {
				return
			}
		case reply := <-d.killAllCh:
			d.stopping = true
			d.killWaiters = append(d.killWaiters, reply)
			for _, lj := range d.sortedJobs() {
				if lj.alive() {
					d.kill(lj, api.StateCancelled, "the node daemon was shut down")
				}
			}
			d.checkKillWaiters()
		}
	}
}

// drainStarts collects the launches still in flight when the loop ended, so
// that their jobs are in the table (and KillAll can find them).
func (d *Daemon) drainStarts() {
	for d.starting > 0 {
		d.onStarted(<-d.startedCh)
	}
}

// stopAll kills every live job, waits for all of them and tries once to
// report them. It runs after the loop ended, in its stead.
func (d *Daemon) stopAll(msg string) {
	d.stopping = true
	for _, lj := range d.sortedJobs() {
		if lj.alive() {
			d.kill(lj, api.StateCancelled, msg)
		}
	}
	// Wait on the handles directly: after Run returned nobody reads the
	// waiters' events.
	for _, lj := range d.sortedJobs() {
		if h := lj.handle; h != nil {
			d.onExited(exitedEvent{key: lj.key, handle: h, res: h.Wait()})
		}
	}
	d.flushReports()
}
