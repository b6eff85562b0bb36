package vmrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"corral/api"
	"corral/noded"
	"corral/noded/cgroup"
	"corral/noded/vmnet"
	"corral/vmimage"
)

// Config configures a Runner.
type Config struct {
	// ImageRoot is the directory holding one subdirectory per image, such
	// as build/images.
	ImageRoot string
	// DefaultImage is the image of jobs that name none; "default" when
	// empty.
	DefaultImage string
	// QEMU is the emulator binary; qemu-system-x86_64 when empty.
	QEMU string
	// Accel is "" to probe for the accelerator, or "kvm" or "tcg" to force
	// one (New still boot-tests it and fails when it does not work).
	Accel string
	// Logger receives the probe's outcome and the VMs' lifecycle; slog's
	// default logger when nil.
	Logger *slog.Logger
	// Inventory is the node's hardware (as it reports it): the runner finds
	// a placed GPU's PCI address in it for -device vfio-pci.
	Inventory *api.Inventory
	// NFSServer is the command that runs a VM's NFS file server, which
	// gets its configuration file as one more argument; empty means this
	// program's own "nfsd" subcommand (corral nfsd).
	NFSServer []string
	// Controllers are the controllers' addresses (URLs or host:port): a
	// guest of a partition whose network is node never reaches them.
	Controllers []string
	// TransitNet is the node-local range the VMs' outbound networks take
	// their veth addresses from, a /30 per VM; 10.213.0.0/16 when unset.
	// It must not overlap the site's networks.
	TransitNet netip.Prefix
	// Overlay is the node's end of its multi-node jobs' private networks:
	// an address of the node on the network between the nodes and the UDP
	// port its VXLAN endpoints listen on (noded --overlay). Unset, the
	// node runs no VM of a multi-node job.
	Overlay netip.AddrPort
	// NodeNetns is the path of the network namespace that is the node's
	// for the VMs' networks (where Overlay's address is, where the job
	// networks' and the ways out's rules go); empty for the daemon's own.
	// It lets several node daemons of one host (corral dev, tests) each
	// have a network of their own.
	NodeNetns string
	// VMIDs is the range of uids (and gids of the same numbers) the VMs'
	// QEMU processes run as, one of its own per running VM; DefaultVMIDs
	// when unset. Nothing else on the node may use these ids.
	VMIDs IDRange
	// GuestDebug has every guest's init trace its steps, with their
	// times, on the VM's console (corral.debug=1).
	GuestDebug bool
	// WarmDir is where the runner keeps its warm starts' snapshots
	// (warm.go): a directory of root's, mode 0700. Empty turns warm
	// starts off: every VM boots.
	WarmDir string
	// WarmMax and WarmMaxBytes bound the snapshots kept, the least
	// recently used going first: 8 snapshots and 4 GiB when 0.
	WarmMax      int
	WarmMaxBytes int64
	// WarmSettle is how long a snapshot's guest prepared to stage root
	// waits, idle, before it is saved: its NFS client's attribute cache
	// (60 s on the root) has then expired, so that every guest restored
	// from it checks the host's files it cached before it uses them.
	// DefaultWarmSettle when 0; negative waits not at all (tests).
	WarmSettle time.Duration
}

// Runner is the vm runner: it runs every job in a QEMU virtual machine of
// its own. It is safe for concurrent use.
type Runner struct {
	cfg    Config
	log    *slog.Logger
	images map[string]*vmimage.Image
	names  []string
	// found is what the accelerator probe found (or an earlier daemon's
	// on this boot, restored); nil until then, and no VM starts before.
	// probeMu lets one probe run at a time.
	found   atomic.Pointer[probeOutcome]
	probeMu sync.Mutex
	tscKHz  int
	// cg places each VM in a cgroup of its own; nil where the host offers
	// none (cgNote says why).
	cg     *cgroup.Manager
	cgNote string
	// tscNote says where tscKHz came from.
	tscNote string
	// outMu serialises the search for a free slot of the transit range.
	outMu sync.Mutex
	// nodeNS is Config.NodeNetns, nil for the daemon's own namespace.
	nodeNS *vmnet.Netns
	// warm holds the warm starts' snapshots; nil when they are off.
	// hashes caches the contents' hashes snapshots are keyed by.
	warm   *warmPool
	hashes fileHashes
	// warmStage, when set, is every snapshot's stage: the benchmark that
	// compares the stages sets it.
	warmStage string
}

var (
	_ noded.Runner = (*Runner)(nil)
	_ noded.Prober = (*Runner)(nil)
	_ noded.Closer = (*Runner)(nil)
)

// New loads the images under cfg.ImageRoot (see Load) and probes the host
// (see Probe): it picks the accelerator by booting a test guest and
// measures QEMU's memory overhead per VM on the way. It takes a few seconds
// under TCG, well under one with KVM.
func New(ctx context.Context, cfg Config) (*Runner, error) {
	r, err := Load(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := r.Probe(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Load checks cfg, finds QEMU, loads the images under cfg.ImageRoot and
// the host's cgroups and TSC frequency, without booting anything: the
// runner re-attaches to VMs (Recover) at once, and starts VMs once Probe or
// Restore succeeded. A node daemon probes after it registered (see
// noded.Prober), so that a restarted one re-adopts its VMs within their
// lease.
func Load(cfg Config) (*Runner, error) {
	if cfg.DefaultImage == "" {
		cfg.DefaultImage = "default"
	}
	if cfg.QEMU == "" {
		cfg.QEMU = "qemu-system-x86_64"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch cfg.Accel {
	case "", "kvm", "tcg":
	default:
		return nil, fmt.Errorf("vm runner: accelerator %q: use kvm, tcg, or nothing to probe", cfg.Accel)
	}
	if cfg.VMIDs == (IDRange{}) {
		cfg.VMIDs = DefaultVMIDs
	}
	if err := cfg.VMIDs.check(); err != nil {
		return nil, fmt.Errorf("vm runner: %w", err)
	}
	r := &Runner{cfg: cfg, log: cfg.Logger.With("runner", "vm"), images: map[string]*vmimage.Image{}}
	if cfg.NodeNetns != "" {
		ns, err := vmnet.Open(cfg.NodeNetns)
		if err != nil {
			return nil, fmt.Errorf("vm runner: the node's network namespace: %w", err)
		}
		r.nodeNS = ns
	}
	if cfg.Overlay.IsValid() && (!cfg.Overlay.Addr().Is4() || cfg.Overlay.Addr().IsUnspecified() || cfg.Overlay.Port() == 0) {
		return nil, fmt.Errorf("vm runner: overlay endpoint %v: give an IPv4 address of the node and a UDP port, as 192.0.2.1:4789", cfg.Overlay)
	}
	qemu, err := exec.LookPath(cfg.QEMU)
	if err != nil {
		return nil, fmt.Errorf("vm runner: %s not found (install qemu-system-x86, or run jobs with --runner process): %w", cfg.QEMU, err)
	}
	r.cfg.QEMU = qemu
	imgs, err := vmimage.List(cfg.ImageRoot)
	if len(imgs) == 0 {
		if err == nil {
			err = fmt.Errorf("no guest images in %s: run \"make image\" to build the default image", cfg.ImageRoot)
		}
		return nil, fmt.Errorf("vm runner: %w", err)
	}
	if err != nil {
		// A broken image must not keep the node from offering the others.
		r.log.Warn("some guest images could not be loaded", "err", err)
	}
	for i := range imgs {
		r.images[imgs[i].Name] = &imgs[i]
		r.names = append(r.names, imgs[i].Name)
	}
	if r.images[cfg.DefaultImage] == nil {
		return nil, fmt.Errorf("vm runner: default image %q is not in %s (it has %s)", cfg.DefaultImage, cfg.ImageRoot, strings.Join(r.names, ", "))
	}
	var tscSource string
	r.tscKHz, tscSource = hostTSCkHz()
	r.tscNote = "tsc " + tscSource
	if cfg.WarmDir != "" {
		if r.warm, err = newWarmPool(r, cfg.WarmDir, cfg.WarmMax, cfg.WarmMaxBytes); err != nil {
			return nil, fmt.Errorf("vm runner: %w", err)
		}
		go r.warm.verify()
	}
	if r.cg, err = cgroup.Detect(); err != nil {
		r.cgNote = "no cgroup per VM: " + err.Error()
		r.log.Warn("job VMs run without a cgroup of their own: no CPU set or memory limit on the host, no CPU time or peak memory per job", "why", err)
	} else {
		r.cgNote = "cgroup " + r.cg.Version() + " per VM"
	}
	return r, nil
}

// Name is what the node reports as its runner.
func (r *Runner) Name() string { return "vm" }

// Images returns the names of the images jobs may ask for, sorted.
func (r *Runner) Images() []string { return append([]string(nil), r.names...) }

// Accel returns the accelerator every VM of this runner gets: "kvm" or
// "tcg", as the probe decided; "" before it did.
func (r *Runner) Accel() string {
	if o := r.found.Load(); o != nil {
		return o.Accel
	}
	return ""
}

// ProbeReport returns one line saying how the accelerator was chosen (each
// attempt, its time or its error), what the memory overhead measurement
// found, where the TSC frequency came from and whether VMs get cgroups.
func (r *Runner) ProbeReport() string {
	probe := "not probed yet"
	if o := r.found.Load(); o != nil {
		probe = o.Report
	}
	return probe + "; " + r.tscNote + "; " + r.cgNote
}

// OverheadMB returns the memory, in MiB, each VM's QEMU process uses beyond
// the guest RAM it is given, as the probe measured it (see
// memUsage.overheadMB); 0 before it did. The node must reserve a job's
// --mem plus this for every VM.
func (r *Runner) OverheadMB() int64 {
	if o := r.found.Load(); o != nil {
		return o.OverheadMB
	}
	return 0
}

// errUnknownImage is wrapped by Start's error for an image this node lacks.
var errUnknownImage = errors.New("unknown guest image")

// image resolves a job's --image (empty means the default).
func (r *Runner) image(name string) (*vmimage.Image, error) {
	if name == "" {
		name = r.cfg.DefaultImage
	}
	img := r.images[name]
	if img == nil {
		return nil, fmt.Errorf("%w %q: this node has %s (choose one with --image)", errUnknownImage, name, strings.Join(r.names, ", "))
	}
	return img, nil
}
