package vmrun

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"corral/api"
	"corral/internal/procref"
	"corral/noded/vmnet"
	"corral/vmimage"
)

// The outbound network of a partition whose network is "node" (see
// vmnet.Outbound): each VM's namespace gets a veth pair to the node, on a
// /30 of the transit range of its own. The guest never sees these
// addresses (the namespace translates its traffic), so they may differ on
// the node a VM migrates to.
const (
	// outboundFile records a VM's vmnet.Outbound in its state directory,
	// before any of it is set up, so that a restarted daemon finds it.
	outboundFile = "outbound.json"
	// hostIfPrefix begins the name of every VM's veth end in the node's
	// namespace; the index of its /30 follows.
	hostIfPrefix = "crl"
	// nsIfName names the veth end inside the VM's namespace.
	nsIfName = "uplink0"
	// outboundTablePrefix begins the name of every VM's table in the
	// node's namespace.
	outboundTablePrefix = "corral-vm-"
)

// defaultTransit is Config.TransitNet's default.
var defaultTransit = netip.MustParsePrefix("10.213.0.0/16")

// alwaysBlocked are destinations no guest reaches whatever the partition:
// link-local addresses (a cloud's metadata service, 169.254.169.254, hands
// out the node's credentials) and loopback (the node's own services; the
// kernel drops such packets from a veth anyway).
var alwaysBlocked = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("127.0.0.0/8")}

// transit returns the runner's transit range.
func (r *Runner) transit() netip.Prefix {
	if r.cfg.TransitNet.IsValid() {
		return r.cfg.TransitNet.Masked()
	}
	return defaultTransit
}

// outboundAt returns the way out through slot i of the transit range
// (the /30 at 4*i), blocking blocked.
func outboundAt(transit netip.Prefix, i int, blocked []netip.Prefix) vmnet.Outbound {
	b := transit.Masked().Addr().As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(4*i) + 1
	host := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	return vmnet.Outbound{
		Table: outboundTablePrefix + strconv.Itoa(i), HostIf: hostIfPrefix + strconv.Itoa(i), NSIf: nsIfName, Tap: tapName,
		Guest: guestAddr.Addr(), HostAddr: netip.PrefixFrom(host, 30), NSAddr: netip.PrefixFrom(host.Next(), 30),
		Blocked: append(append([]netip.Prefix{transit.Masked()}, alwaysBlocked...), blocked...),
	}
}

// controllerPrefixes resolves the controllers' addresses (URLs or
// host:port) to the IPv4 addresses a guest must never reach.
func controllerPrefixes(addrs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, a := range addrs {
		host := a
		if u, err := url.Parse(a); err == nil && u.Host != "" {
			host = u.Hostname()
		} else if h, _, err := net.SplitHostPort(a); err == nil {
			host = h
		}
		if host == "" {
			continue
		}
		ips, err := net.LookupIP(host)
		if err != nil {
			return nil, fmt.Errorf("controller %s: %w (the node must know its address to keep the VM from reaching it)", a, err)
		}
		for _, ip := range ips {
			if v4 := ip.To4(); v4 != nil {
				out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte(v4)), 32))
			}
		}
	}
	return out, nil
}

// connectOutbound gives the VM's namespace its way out: it finds a free
// slot of the transit range (starting from one derived from the state
// directory), records it in dir and sets it up. The node forwards IPv4
// from then on (vmnet.EnableForwarding).
func (r *Runner) connectOutbound(dir string, gn *guestNet) error {
	blocked, err := controllerPrefixes(r.cfg.Controllers)
	if err != nil {
		return err
	}
	if err := r.onNode(func() error { return vmnet.EnableForwarding(hostIfPrefix) }); err != nil {
		return fmt.Errorf("the VM's outbound network: %w", err)
	}
	r.outMu.Lock()
	defer r.outMu.Unlock()
	slots := 1 << (30 - r.transit().Bits())
	h := fnv.New32a()
	h.Write([]byte(dir))
	start := int(h.Sum32() % uint32(slots))
	for k := 0; k < slots; k++ {
		o := outboundAt(r.transit(), (start+k)%slots, blocked)
		taken := false
		r.onNode(func() error { taken = vmnet.HasLink(o.HostIf); return nil })
		if taken {
			continue
		}
		if err := procref.WriteJSON(filepath.Join(dir, outboundFile), o); err != nil {
			return fmt.Errorf("recording the VM's outbound network: %w", err)
		}
		err := r.onNode(func() error { return gn.ns.Connect(o) })
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			os.Remove(filepath.Join(dir, outboundFile))
			return fmt.Errorf("the VM's outbound network: %w", err)
		}
		gn.out = &o
		return nil
	}
	return fmt.Errorf("the VM's outbound network: all %d slots of the transit range %s are taken", slots, r.transit())
}

// recoverOutbound finds the way out an earlier daemon gave the VM in dir:
// it sets its rules again when the VM still runs (and ns is its
// namespace), and removes them otherwise. It returns the way out kept,
// nil when there is none.
func (r *Runner) recoverOutbound(dir string, ns *vmnet.Netns, alive bool) *vmnet.Outbound {
	var o vmnet.Outbound
	path := filepath.Join(dir, outboundFile)
	if err := procref.ReadJSON(path, &o); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("cannot read the VM's outbound network record", "dir", dir, "err", err)
		}
		return nil
	}
	if alive && ns != nil {
		if err := r.onNode(func() error { return ns.Restore(o) }); err != nil {
			r.log.Error("cannot restore the VM's outbound network; the VM runs without it", "dir", dir, "err", err)
			r.onNode(o.Remove)
			return nil
		}
		r.log.Info("re-adopted the VM's outbound network", "dir", dir, "veth", o.HostIf, "table", o.Table)
		return &o
	}
	if err := r.onNode(o.Remove); err != nil {
		r.log.Warn("cannot remove the outbound network of a VM that is gone", "dir", dir, "err", err)
	}
	os.Remove(path)
	return nil
}

// removeOutbound removes the VM's way out and its record, in the node's
// namespace node (nil: the daemon's own).
func removeOutbound(node *vmnet.Netns, dir string, o *vmnet.Outbound) error {
	if o == nil {
		return nil
	}
	err := onNode(node, o.Remove)
	os.Remove(filepath.Join(dir, outboundFile))
	return err
}

// onNode runs fn in the node's namespace (Config.NodeNetns): on a thread
// of its own inside it, or on the caller's when the node's is the
// daemon's own.
func (r *Runner) onNode(fn func() error) error { return onNode(r.nodeNS, fn) }

func onNode(node *vmnet.Netns, fn func() error) error {
	if node == nil {
		return fn()
	}
	return node.Do(fn)
}

// resolvConfs are where the node's resolvers are listed: resolv.conf,
// and, when that names only a local stub (systemd-resolved's 127.0.0.53),
// the upstream servers behind it.
var resolvConfs = []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"}

// guestNameservers returns the nameservers a guest of a "node" network can
// use: the IPv4 servers of the node's resolv.conf files (confs, in order,
// the first file with any usable server wins) that are not one of the
// node's own addresses (local) or blocked, which the guest cannot reach.
func guestNameservers(confs [][]byte, local []netip.Addr, blocked []netip.Prefix) []string {
	for _, c := range confs {
		var out []string
		sc := bufio.NewScanner(bytes.NewReader(c))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 || f[0] != "nameserver" {
				continue
			}
			a, err := netip.ParseAddr(f[1])
			if err != nil || !a.Is4() || a.IsLoopback() || a.IsUnspecified() || containsAddr(local, a) || inPrefixes(blocked, a) {
				continue
			}
			out = append(out, a.String())
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// nodeNameservers reads the node's resolvers for guestNameservers.
func nodeNameservers(blocked []netip.Prefix) []string {
	var confs [][]byte
	for _, p := range resolvConfs {
		if b, err := os.ReadFile(p); err == nil {
			confs = append(confs, b)
		}
	}
	var local []netip.Addr
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
					local = append(local, ip.Unmap())
				}
			}
		}
	}
	return guestNameservers(confs, local, blocked)
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func inPrefixes(list []netip.Prefix, a netip.Addr) bool {
	for _, p := range list {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// checkNetwork checks the partition's network against the VM the job
// gets: the node network goes through the NFS share's card, which a
// virtiofs VM and an image without the host's root do not have.
func checkNetwork(network string, gfs *vmimage.FS) error {
	if network != api.NetworkNode || (gfs != nil && gfs.Kind == vmimage.ShareNFS) {
		return nil
	}
	if gfs != nil {
		return fmt.Errorf("the partition's network node needs the nfs share, and this job gets virtiofs (it asked for --no-migrate, or its partition says share: virtiofs): submit it without --no-migrate")
	}
	return fmt.Errorf("the partition's network node needs the host's root over the nfs share, and this job's image has none: use an image built with the host's root, or a partition whose network is none")
}
