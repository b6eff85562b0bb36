//go:build linux

package guestinit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"corral/vmimage"
)

// netDir lists the guest's network interfaces.
const netDir = "/sys/class/net"

// nicByMAC returns the name of the guest's network interface whose MAC is
// mac, waiting up to wait for its driver to create it: with two cards the
// kernel's names (eth0, eth1) follow the order it probes them in, which
// is not the command line's.
func nicByMAC(mac net.HardwareAddr, wait time.Duration) (string, error) {
	want := mac.String()
	deadline := time.Now().Add(wait)
	for {
		ents, _ := os.ReadDir(netDir)
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(netDir, e.Name(), "address"))
			if err == nil && strings.TrimSpace(string(b)) == want {
				return e.Name(), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no network card with MAC %s appeared within %v", want, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// jobNet sets up the job's private network (a multi-node job's): its
// card, found by MAC, with its address and MTU, and the job's /etc/hosts
// in the job's root (g.root: the overlay's upper layer, or the
// initramfs), so that the job reaches its other VMs by their nodes'
// names. It runs after the job's root is ready and before the agent and
// the job start.
func (g *guest) jobNet(n *vmimage.Net) error {
	for _, f := range []string{"virtio", "net"} {
		if err := g.loadModules(f); err != nil {
			// An image built before the net feature has virtio_net
			// with the NFS share's modules.
			if f != "net" || g.loadModules("nfs") != nil {
				return err
			}
		}
	}
	nic, err := nicByMAC(n.MAC, 5*time.Second)
	if err != nil {
		return fmt.Errorf("the job network's card: %w", err)
	}
	if err := configureNIC(nic, n.Addr, n.MTU); err != nil {
		return fmt.Errorf("the job network's card %s: %w", nic, err)
	}
	hosts := g.root + "/etc/hosts"
	base, err := os.ReadFile(hosts)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading /etc/hosts: %w", err)
	}
	// The host's may be a link: replace the link, not what it points to.
	if err := os.Remove(hosts); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replacing /etc/hosts: %w", err)
	}
	if err := os.WriteFile(hosts, vmimage.RenderHosts(base, n.Hosts), 0o644); err != nil {
		return fmt.Errorf("writing /etc/hosts: %w", err)
	}
	g.logf("job network up on %s: %s", nic, n.Addr)
	return nil
}
