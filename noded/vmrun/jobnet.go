package vmrun

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"corral/api"
	"corral/internal/procref"
	"corral/noded"
	"corral/noded/vmnet"
	"corral/vmimage"
)

// A multi-node job's VM joins its job's private network (vmnet.JobNet):
// a second card, its own tap device in the VM's namespace, bridged there
// to a VXLAN device whose peers are the job's other nodes. A second card
// rather than the share's: the share's network has the same addresses in
// every VM (each VM's namespace has its own file server at 10.0.2.2), so
// bridging it between VMs would put two servers at one address on one
// segment, and the guest's way out (network node) stays apart from the
// job's network.
const (
	// jobNetFile records a VM's vmnet.JobNet in its state directory
	// before any of it is set up, so that a restarted daemon finds it.
	jobNetFile = "jobnet.json"
)

// jobNetRecord is jobnet.json.
type jobNetRecord struct {
	Net vmnet.JobNet `json:"net"`
	// OwnNS says the VM's namespace was made for the job's network
	// alone (a VM without the NFS share) and goes with it.
	OwnNS bool `json:"own_ns,omitempty"`
}

// jobNetOf returns the VM's part of its job's network n on a node whose
// endpoint is local: its segment, its card's address, and the other
// members as its peers. Every member must have its node's endpoint.
func jobNetOf(n *api.JobNet, local netip.AddrPort) (vmnet.JobNet, error) {
	if !local.IsValid() {
		return vmnet.JobNet{}, errors.New("this node offers no job network (its daemon runs with --overlay none, or its first controller is on loopback): a multi-node VM job cannot run here; start the daemon with --overlay ADDR:PORT, an address of the node on the network between the nodes")
	}
	if !n.Addr.IsValid() || !n.Addr.Addr().Is4() || n.Addr.Bits() < 8 {
		return vmnet.JobNet{}, fmt.Errorf("job network: address %v: want an IPv4 address on a /8 or smaller", n.Addr)
	}
	j := vmnet.JobNet{VNI: n.VNI, Local: local, Card: n.Addr.Addr(), Table: vmnet.JobNetTable(n.VNI, local.Port())}
	self := false
	for _, m := range n.Members {
		if m.Addr == j.Card {
			self = true
			continue
		}
		ep, err := api.ParseOverlay(m.Endpoint)
		if err != nil {
			return vmnet.JobNet{}, fmt.Errorf("job network: node %s of the job: %w (its daemon must run with --overlay)", m.Node, err)
		}
		j.Peers = append(j.Peers, vmnet.Peer{Endpoint: ep, Card: m.Addr})
	}
	if !self {
		return vmnet.JobNet{}, fmt.Errorf("job network: this VM's address %v is not among the job's members", j.Card)
	}
	return j, j.Check()
}

// guestJobNet returns the payload's part of the job's network: the
// guest's card and the job's hosts, named after their nodes (a node
// whose name no resolver takes is left out of /etc/hosts, and logged).
func guestJobNet(log *slog.Logger, n *api.JobNet, j vmnet.JobNet) *vmimage.Net {
	g := &vmimage.Net{MAC: vmnet.CardMAC(j.Card), Addr: n.Addr, MTU: j.MTU}
	for _, m := range n.Members {
		if !vmimage.ValidHostName(m.Node) || slices.ContainsFunc(g.Hosts, func(h vmimage.Host) bool { return h.Name == m.Node }) {
			log.Warn("a node of the job is left out of its guests' /etc/hosts: its name is no host name", "node", m.Node)
			continue
		}
		g.Hosts = append(g.Hosts, vmimage.Host{Name: m.Node, Addr: m.Addr})
	}
	return g
}

// planJobNet returns the VM's part of the job's network, its MTU derived
// from the node's underlay, and the guest's; nil for a job of one node.
func (r *Runner) planJobNet(job *api.Job) (*vmnet.JobNet, *vmimage.Net, error) {
	if job.Net == nil {
		return nil, nil, nil
	}
	j, err := jobNetOf(job.Net, r.cfg.Overlay)
	if err != nil {
		return nil, nil, fmt.Errorf("job %d: %w", job.ID, err)
	}
	if j.MTU, err = vmnet.JobNetMTU(r.nodeNS, j.Local.Addr()); err != nil {
		return nil, nil, fmt.Errorf("job %d: %w", job.ID, err)
	}
	return &j, guestJobNet(r.log, job.Net, j), nil
}

// joinJobNet records j in dir and puts the VM on it: in the NFS share's
// namespace (gn), or in a namespace of its own when the VM has none. It
// returns the tap device QEMU gets as fdJobTap. After a failure nothing
// of it is left.
func (r *Runner) joinJobNet(dir string, gn *guestNet, j vmnet.JobNet) (*os.File, error) {
	rec := jobNetRecord{Net: j}
	var ns *vmnet.Netns
	if gn != nil {
		ns = gn.ns
	} else {
		path := filepath.Join(dir, netnsFile)
		if old, err := vmnet.Open(path); err == nil {
			old.Remove() // left by an earlier run in a reused state directory
		}
		os.Remove(path)
		var err error
		if ns, err = vmnet.Create(path); err != nil {
			return nil, err
		}
		rec.OwnNS = true
	}
	if err := procref.WriteJSON(filepath.Join(dir, jobNetFile), rec); err != nil {
		if rec.OwnNS {
			ns.Remove()
		}
		return nil, fmt.Errorf("recording the VM's job network: %w", err)
	}
	tap, _, err := ns.JoinJobNet(r.nodeNS, j)
	if err != nil {
		os.Remove(filepath.Join(dir, jobNetFile))
		if rec.OwnNS {
			ns.Remove()
		}
		return nil, fmt.Errorf("the VM's job network: %w", err)
	}
	r.log.Info("the VM joined its job's network", "dir", dir, "vni", j.VNI, "card", j.Card, "peers", len(j.Peers), "mtu", j.MTU)
	return tap, nil
}

// leaveJobNet takes the VM of dir off its job's network, if it is on one:
// the node's table and the VXLAN device go at once (the segment is free
// on the node for the job's next run), the namespace too when it was the
// job network's own. The record goes last.
func leaveJobNet(log *slog.Logger, node *vmnet.Netns, dir string) {
	var rec jobNetRecord
	path := filepath.Join(dir, jobNetFile)
	if err := procref.ReadJSON(path, &rec); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cannot read the VM's job network record", "dir", dir, "err", err)
		}
		return
	}
	ns, err := vmnet.Open(filepath.Join(dir, netnsFile))
	if err != nil {
		ns = nil
	}
	if err := ns.LeaveJobNet(node, rec.Net); err != nil {
		log.Warn("removing the VM's job network", "dir", dir, "vni", rec.Net.VNI, "err", err)
	}
	if rec.OwnNS && ns != nil {
		ns.Remove()
	}
	os.Remove(path)
	log.Info("the VM left its job's network", "dir", dir, "vni", rec.Net.VNI)
}

// recoverJobNet finds the job network an earlier daemon gave the VM in
// dir: while the VM runs it sets the node's table and the peers'
// entries again (a node that rebooted its rules, or lost them), and
// takes the VM off it otherwise.
func (r *Runner) recoverJobNet(dir string, alive bool) {
	var rec jobNetRecord
	if err := procref.ReadJSON(filepath.Join(dir, jobNetFile), &rec); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("cannot read the VM's job network record", "dir", dir, "err", err)
		}
		return
	}
	if !alive {
		leaveJobNet(r.log, r.nodeNS, dir)
		return
	}
	ns, err := vmnet.Open(filepath.Join(dir, netnsFile))
	if err == nil {
		err = ns.SetJobNetPeers(r.nodeNS, rec.Net, rec.Net)
	}
	if err != nil {
		r.log.Error("cannot restore the VM's job network; its guest is cut off from the job's other VMs", "dir", dir, "vni", rec.Net.VNI, "err", err)
		return
	}
	r.log.Info("re-adopted the VM's job network", "dir", dir, "vni", rec.Net.VNI, "table", rec.Net.Table)
}

// SetJobNet follows a change of the job's network while the VM runs (a
// member's node moved its endpoint): the VM's peers become n's. The
// segment, the node's endpoint and the VM's own address cannot change
// under a running guest.
func (v *VM) SetJobNet(n *api.JobNet) error {
	var rec jobNetRecord
	path := filepath.Join(v.f.dir, jobNetFile)
	if err := procref.ReadJSON(path, &rec); err != nil {
		return fmt.Errorf("the VM's job network: %w", err)
	}
	j, err := jobNetOf(n, rec.Net.Local)
	if err != nil {
		return err
	}
	if j.VNI != rec.Net.VNI || j.Card != rec.Net.Card || j.Local != rec.Net.Local {
		return fmt.Errorf("the VM's job network: segment %d, address %v cannot become %d, %v while the VM runs", rec.Net.VNI, rec.Net.Card, j.VNI, j.Card)
	}
	j.MTU = rec.Net.MTU
	if slices.Equal(j.Peers, rec.Net.Peers) {
		return nil
	}
	ns, err := vmnet.Open(filepath.Join(v.f.dir, netnsFile))
	if err != nil {
		return err
	}
	if err := ns.SetJobNetPeers(v.nodeNS, rec.Net, j); err != nil {
		return err
	}
	old := rec.Net.Peers
	rec.Net = j
	if err := procref.WriteJSON(path, rec); err != nil {
		return fmt.Errorf("recording the VM's job network: %w", err)
	}
	v.log.Info("the job network's peers changed", "vni", j.VNI, "before", len(old), "now", len(j.Peers))
	return nil
}

var _ noded.JobNetFollower = (*VM)(nil)

// Overlay returns where the node's end of its jobs' private networks
// listens (Config.Overlay), invalid when it offers none.
func (r *Runner) Overlay() netip.AddrPort { return r.cfg.Overlay }

// ForNode returns a runner like r (its images, its accelerator probe, its
// warm starts' snapshots) whose node has the overlay endpoint overlay: corral dev runs several
// node daemons in one network namespace, each needing a port of its own.
func (r *Runner) ForNode(overlay netip.AddrPort) (*Runner, error) {
	cfg := r.cfg
	cfg.Overlay = overlay
	cfg.WarmDir = "" // r's pool of snapshots is shared, not opened again
	n, err := Load(cfg)
	if err != nil {
		return nil, err
	}
	if o := r.found.Load(); o != nil {
		n.found.Store(o)
	}
	n.warm, n.warmStage = r.warm, r.warmStage
	return n, nil
}

// jobNetArgs are the QEMU arguments of the guest's card on its job's
// network (the tap device inherited as fdJobTap), none without one.
func jobNetArgs(j *vmnet.JobNet, shareCard bool) []string {
	if j == nil {
		return nil
	}
	var args []string
	if !shareCard {
		// As for the share's card (guestNet.qemuArgs).
		args = append(args, "-global", "virtio-mmio.force-legacy=false")
	}
	return append(args,
		"-netdev", "tap,id=job,fd="+strconv.Itoa(fdJobTap)+",vhost=off",
		"-device", "virtio-net-device,netdev=job,mac="+vmnet.CardMAC(j.Card).String())
}

// hasJobNet reports whether the VM of dir is on a job's network.
func hasJobNet(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, jobNetFile))
	return err == nil
}
