package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"corral/api"
	"corral/noded/vmnet"
)

// The environment of a child test binary that inOwnNetns starts.
const (
	// netnsEnv names the test the child runs in its own network namespace.
	netnsEnv = "CORRAL_E2E_NETNS"
	// binEnv is the corral binary the parent built: the child builds none.
	binEnv = "CORRAL_E2E_BIN"
	// probeEnv is the parent's recorded vm probe (vmProbe), if it has one.
	probeEnv = "CORRAL_E2E_PROBE"
)

// The site around the node that siteNet builds.
const (
	siteAddr       = "198.51.100.7:8080" // a server of the site, beyond the node
	siteController = "198.51.100.8"      // where the controller listens, beside it
	nodeUplink     = "203.0.113.1"       // the node's address on the site's network
)

// inOwnNetns runs the calling test again in a child process with a network
// namespace of its own, which plays the node's: its interfaces, routes and
// the VMs' rules never touch the machine's own network. It returns true in
// the child (run the test), false in the parent once the child passed.
func inOwnNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsEnv) == t.Name() {
		if l, err := netlink.LinkByName("lo"); err == nil {
			netlink.LinkSetUp(l)
		}
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs its node in a network namespace of its own")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), netnsEnv+"="+t.Name(), binEnv+"="+corralBin)
	vmProbe.Lock()
	if vmProbe.record != nil {
		cmd.Env = append(cmd.Env, probeEnv+"="+string(vmProbe.record))
	}
	vmProbe.Unlock()
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("the test in its own network namespace: %v", err)
	}
	return false
}

// siteNet builds the site around the node (the test's namespace, see
// inOwnNetns): an "outside" namespace behind the node's uplink
// (nodeUplink/24, default route via .2) that holds a server of the site
// (siteAddr) and the address siteController, where startControllerIn
// runs the controller. It returns the outside namespace and a count of the
// connections the site's server accepted.
func siteNet(t *testing.T) (*vmnet.Netns, *atomic.Int32) {
	t.Helper()
	outside, err := vmnet.Create(filepath.Join(t.TempDir(), "outside"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outside.Remove() })
	f, err := os.Open(outside.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "out0", PeerNamespace: netlink.NsFd(int(f.Fd()))}); err != nil {
		t.Fatal(err)
	}
	if err := linkAddr("up0", nodeUplink+"/24"); err != nil {
		t.Fatal(err)
	}
	up, err := netlink.LinkByName("up0")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: up.Attrs().Index, Gw: net.ParseIP("203.0.113.2")}); err != nil {
		t.Fatal(err)
	}
	err = outside.Do(func() error {
		if err := linkAddr("out0", "203.0.113.2/24"); err != nil {
			return err
		}
		if err := linkAddr("lo", strings.Split(siteAddr, ":")[0]+"/32"); err != nil {
			return err
		}
		return linkAddr("lo", siteController+"/32")
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := outside.Listen(siteAddr)
	if err != nil {
		t.Fatal(err)
	}
	return outside, serveCounting(t, l)
}

// linkAddr gives the interface dev the address a (CIDR) and brings it up.
func linkAddr(dev, a string) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return err
	}
	p, err := netlink.ParseIPNet(a)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: p}); err != nil {
		return fmt.Errorf("%s on %s: %w", a, dev, err)
	}
	return netlink.LinkSetUp(l)
}

// serveCounting accepts connections on l until the test ends, closing each
// at once, and returns how many it accepted.
func serveCounting(t *testing.T, l net.Listener) *atomic.Int32 {
	t.Cleanup(func() { l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}

// startControllerIn starts a one-voter controller inside ns, listening on
// ip, as a controller on another host of the site.
func startControllerIn(t *testing.T, ns *vmnet.Netns, ip string, extra ...string) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir()}
	var ports []string
	for range 2 {
		l, err := ns.Listen(ip + ":0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().String())
		l.Close()
	}
	args := append([]string{"ctld", "--id", "c1", "--data", filepath.Join(c.dir, "c1"), "--raft", ports[0], "--http", ports[1],
		"--peers", "c1=" + ports[0], "--log-level", "warn"}, extra...)
	p := &proc{name: "c1", args: args, log: filepath.Join(c.dir, "c1.log")}
	// A process started on a thread inside ns is born in ns.
	if err := ns.Do(p.launch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill(syscall.SIGKILL) })
	c.ctlds = []*proc{p}
	c.http = []string{"http://" + ports[1]}
	c.addr = c.http[0]
	return c
}

// checkNodeNetwork submits a job of the partition site, whose network is
// node, in a cluster that siteNet's site holds (its controller on
// siteController): from its VM the job reaches the site's server through
// the node, and reaches neither the controller, nor servers on the node's
// loopback or on all the node's addresses (by its uplink address, by
// loopback, or by the address of the VM's gateway, which slirp would have
// mapped to the node's loopback). Its output names each address reached
// or unreached; the node's servers accept no connection.
func checkNodeNetwork(t *testing.T, c *cluster, work string, siteHits *atomic.Int32) {
	t.Helper()
	lo, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	all, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	loHits, allHits := serveCounting(t, lo), serveCounting(t, all)
	_, loPort, _ := net.SplitHostPort(lo.Addr().String())
	_, allPort, _ := net.SplitHostPort(all.Addr().String())
	_, ctlPort, _ := net.SplitHostPort(strings.TrimPrefix(c.addr, "http://"))
	reach := map[string]bool{
		siteAddr:                       true,
		siteController + ":" + ctlPort: false,
		nodeUplink + ":" + allPort:     false,
		"127.0.0.1:" + loPort:          false,
		"127.0.0.1:" + allPort:         false,
		"10.0.2.2:" + loPort:           false,
		"10.0.2.2:" + allPort:          false,
	}
	var targets []string
	for a := range reach {
		targets = append(targets, a)
	}
	// All at once: a connection the node drops waits out its timeout.
	writeFile(t, filepath.Join(work, "net.sh"), `#!/bin/bash
#SBATCH --mem=256M
i=0
for t in `+strings.Join(targets, " ")+`; do
	{ timeout 8 bash -c "exec 3<>/dev/tcp/${t%:*}/${t#*:}" 2>/dev/null && echo "reached $t" || echo "unreached $t"; } > /tmp/probe$i &
	i=$((i+1))
done
wait
cat /tmp/probe*
`)
	start := time.Now()
	id := mustID(t, c.submit(t, work, "-p", "site", "-o", filepath.Join(work, "net.out"), filepath.Join(work, "net.sh")))
	j := waitJob(t, c.client(t), id, api.StateCompleted, 2*time.Minute)
	out := readFile(t, filepath.Join(work, "net.out"))
	t.Logf("job %d of partition site (network node) on %s, %v from submit to its end:\n%s", id, j.Node, time.Since(start).Round(time.Millisecond), out)
	lines := strings.Split(out, "\n")
	for a, want := range reach {
		line := "unreached " + a
		if want {
			line = "reached " + a
		}
		if !slices.Contains(lines, line) {
			t.Errorf("the job's output lacks %q", line)
		}
	}
	if siteHits.Load() == 0 {
		t.Error("the site's server accepted no connection from the job")
	}
	if n := loHits.Load() + allHits.Load(); n != 0 {
		t.Errorf("the node's servers accepted %d connections from the job", n)
	}
}
