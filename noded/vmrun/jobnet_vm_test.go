package vmrun

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"corral/api"
	"corral/internal/ident"
	"corral/noded"
	"corral/noded/vmnet"
)

// underlayNode makes a node's network namespace joined by a veth to the
// test's underlay bridge ul0 (in the test's own namespace), with address
// addr on its end, and returns it.
func underlayNode(t *testing.T, dir, name string, addr netip.Prefix) *vmnet.Netns {
	t.Helper()
	ns, err := vmnet.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Remove() })
	f, err := os.Open(ns.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "ul-" + name, MasterIndex: mustLinkIndex(t, "ul0")}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(f.Fd()))}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	l, _ := netlink.LinkByName("ul-" + name)
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	err = ns.Do(func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		a, _ := netlink.ParseIPNet(addr.String())
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: a}); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func mustLinkIndex(t *testing.T, name string) int {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}

// nodeRunner is a vm runner whose node is the namespace ns, with its
// overlay endpoint at overlay; it takes the shared runner's probe.
func nodeRunner(t *testing.T, ns *vmnet.Netns, overlay string) *Runner {
	t.Helper()
	base := testRunner(t)
	found, err := base.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg := base.cfg
	cfg.NodeNetns, cfg.Overlay = ns.Path, netip.MustParseAddrPort(overlay)
	r, err := Load(cfg)
	if err == nil {
		err = r.Restore(found)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// jobNetScript serves the guest's host name on port 7000 to whoever
// connects, then waits to be killed.
const jobNetScript = `#!/bin/bash
busybox nc -ll -p 7000 -e hostname &
echo serving
while :; do sleep 1; done
`

// netProbe is run in a guest by its agent, as root (the worst a job's
// user could make of its guest): it routes the underlay's addresses over
// the job's card too, then asks each target (HOST:PORT arguments) for its
// word, all at once, printing the word or "unreached HOST:PORT". A
// target written +HOST:PORT is expected to answer: it is asked again,
// up to ten times, until it does (a loaded host may starve a TCG guest
// past one try's 8 s); the others get one try, which is the stricter.
const netProbe = `dev=$(basename "$(dirname "$(grep -l '^52:54:01' /sys/class/net/*/address)")")
busybox ip route add 192.0.2.0/24 dev "$dev"
echo "hostname $(hostname) card $dev"
getent hosts nodea nodeb | awk '{print "hosts", $1, $2}'
ask() { timeout 8 bash -c "exec 3<>/dev/tcp/${1%:*}/${1#*:} && cat <&3" 2>/dev/null; }
i=0
for t in "$@"; do
	case $t in
	+*) (t=${t#+}; for n in 1 2 3 4 5 6 7 8 9 10; do ask "$t" && exit; sleep 1; done; echo "unreached $t") > /tmp/probe$i & ;;
	*) (ask "$t" || echo "unreached $t") > /tmp/probe$i & ;;
	esac
	i=$((i+1))
done
wait
cat /tmp/probe*
`

// TestJobNetworkBetweenNodes runs a two-node job's VMs on two nodes,
// each node a network namespace on an underlay (a veth to a bridge in the
// test's namespace), and a VM of another job on the first node. From the
// first job's VM on node a its sibling on node b answers by its node's
// name (the guest's /etc/hosts), over the VXLAN segment between the
// nodes; the other job's VM does not, nor do the nodes' addresses or the
// controller's, even with the underlay routed over the job's card. The
// other job's VM reaches neither of the first job's. A node that lost its
// table gets it back from a restarted daemon's recovery; the segment's
// rules, devices and the node's VXLAN port go with the VMs.
func TestJobNetworkBetweenNodes(t *testing.T) {
	guestOnly(t)
	if !inOwnNetns(t) {
		return
	}
	dir := t.TempDir()
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "ul0"}}); err != nil {
		t.Fatal(err)
	}
	ul, _ := netlink.LinkByName("ul0")
	ctl, _ := netlink.ParseIPNet("192.0.2.9/24")
	if err := netlink.AddrAdd(ul, &netlink.Addr{IPNet: ctl}); err != nil {
		t.Fatal(err)
	}
	netlink.LinkSetUp(ul)
	serveWord(t, nil, "192.0.2.9:7001", "controller")
	nodeA := underlayNode(t, dir, "a", netip.MustParsePrefix("192.0.2.1/24"))
	nodeB := underlayNode(t, dir, "b", netip.MustParsePrefix("192.0.2.2/24"))
	serveWord(t, nodeA, "0.0.0.0:7004", "node-a")
	serveWord(t, nodeB, "0.0.0.0:7004", "node-b")
	rA, rB := nodeRunner(t, nodeA, "192.0.2.1:4789"), nodeRunner(t, nodeB, "192.0.2.2:4790")

	member := func(node, addr, ep string) api.JobNetMember {
		return api.JobNetMember{Node: node, Addr: netip.MustParseAddr(addr), Endpoint: ep}
	}
	job1 := []api.JobNetMember{member("nodea", "10.214.0.1", "192.0.2.1:4789"), member("nodeb", "10.214.0.2", "192.0.2.2:4790")}
	job2 := []api.JobNetMember{member("nodea", "10.214.0.3", "192.0.2.1:4789"), member("nodeb", "10.214.0.4", "192.0.2.2:4790")}
	vm := func(r *Runner, id uint64, node string, vni uint32, addr string, members []api.JobNetMember) (*VM, noded.LaunchSpec) {
		spec := jobSpec(t, jobNetScript, 1, 256)
		spec.Job.ID, spec.Job.Node = id, node
		spec.Job.Net = &api.JobNet{VNI: vni, Addr: netip.MustParsePrefix(addr + "/16"), Members: members}
		return start(t, r, spec), spec
	}
	v1a, s1a := vm(rA, 1, "nodea", 101, "10.214.0.1", job1)
	v1b, s1b := vm(rB, 1, "nodeb", 101, "10.214.0.2", job1)
	v2a, s2a := vm(rA, 2, "nodea", 102, "10.214.0.3", job2)
	for _, s := range []noded.LaunchSpec{s1a, s1b, s2a} {
		waitFor(t, "job "+s.Job.Node+" to serve", 3*time.Minute, func() bool { return strings.Contains(readFile(t, s.Stdout), "serving") })
	}

	probe := func(v *VM, targets ...string) string {
		t.Helper()
		argv := append([]string{"bash", "-c", netProbe, "probe"}, targets...)
		out, errOut, res, err := runExecWithin(t, v, noded.ExecRequest{Argv: argv, Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, Dir: "/", User: ident.User{Name: "root", Groups: []uint32{0}}}, "", 4*time.Minute)
		if err != nil || res.Code != 0 {
			t.Fatalf("probe: %v %+v %s", err, res, errOut)
		}
		return out
	}
	out := probe(v1a, "+nodeb:7000", "10.214.0.3:7000", "192.0.2.1:7004", "192.0.2.2:7004", "192.0.2.9:7001")
	t.Logf("from job 1's VM on node a:\n%s", out)
	if !slices.Contains(strings.Split(out, "\n"), "nodeb") {
		t.Error("job 1's VM on node a: its sibling on node b did not answer by name")
	}
	for _, w := range []string{"hostname nodea", "hosts 10.214.0.1 nodea", "hosts 10.214.0.2 nodeb",
		"unreached 10.214.0.3:7000", "unreached 192.0.2.1:7004", "unreached 192.0.2.2:7004", "unreached 192.0.2.9:7001"} {
		if !strings.Contains(out, w) {
			t.Errorf("job 1's VM on node a: output lacks %q", w)
		}
	}
	out = probe(v2a, "10.214.0.1:7000", "10.214.0.2:7000", "192.0.2.2:7004")
	t.Logf("from job 2's VM on node a:\n%s", out)
	for _, w := range []string{"hosts 10.214.0.3 nodea", "unreached 10.214.0.1:7000", "unreached 10.214.0.2:7000", "unreached 192.0.2.2:7004"} {
		if !strings.Contains(out, w) {
			t.Errorf("job 2's VM on node a: output lacks %q", w)
		}
	}
	if lines := strings.Split(out, "\n"); slices.Contains(lines, "nodea") || slices.Contains(lines, "nodeb") {
		t.Errorf("job 2's VM reached a VM of job 1:\n%s", out)
	}

	if udpPortFree(t, nodeA, 4789) || udpPortFree(t, nodeB, 4790) {
		t.Error("the nodes' VXLAN ports are free while their VMs run: the check after teardown proves nothing")
	}

	// A node that lost the segment's table gets it back when a restarted
	// daemon recovers the VM.
	table := vmnet.JobNetTable(101, 4789)
	if err := vmnet.RemoveJobNetTable(nodeA, table); err != nil {
		t.Fatal(err)
	}
	rA.recoverJobNet(s1a.Dir, true)
	if !nodeHasTable(t, nodeA, table) {
		t.Error("recovery did not set the segment's table again")
	}
	if blockers, err := v1a.MigrationBlockers(); err != nil || len(blockers) == 0 {
		t.Errorf("a VM on its job's network: migration blockers %v, %v; want one", blockers, err)
	}

	// The segment's rules and devices go with each VM.
	for _, c := range []struct {
		v    *VM
		node *vmnet.Netns
		dir  string
		vni  uint32
		port uint16
	}{{v1a, nodeA, s1a.Dir, 101, 4789}, {v1b, nodeB, s1b.Dir, 101, 4790}, {v2a, nodeA, s2a.Dir, 102, 4789}} {
		c.v.Kill(0)
		waitResult(t, c.v, time.Minute)
		if nodeHasTable(t, c.node, vmnet.JobNetTable(c.vni, c.port)) {
			t.Errorf("segment %d's table is left on its node after its VM ended", c.vni)
		}
		if hasJobNet(c.dir) {
			t.Errorf("segment %d's record is left after its VM ended", c.vni)
		}
	}
	// Nothing of the segments holds the nodes' VXLAN ports any more.
	for _, c := range []struct {
		node *vmnet.Netns
		port int
	}{{nodeA, 4789}, {nodeB, 4790}} {
		waitFor(t, fmt.Sprintf("port %d of %s to be free", c.port, c.node.Path), 10*time.Second, func() bool { return udpPortFree(t, c.node, c.port) })
	}
}

// udpPortFree reports whether a socket may bind UDP port on every
// address of the node's namespace: no VXLAN device of the node holds it.
func udpPortFree(t *testing.T, node *vmnet.Netns, port int) bool {
	t.Helper()
	free := false
	if err := node.Do(func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		if err == nil {
			c.Close()
		}
		free = err == nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return free
}

// nodeHasTable reports whether the node's namespace holds the IPv4 table
// name.
func nodeHasTable(t *testing.T, node *vmnet.Netns, name string) bool {
	t.Helper()
	has := false
	err := node.Do(func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		_, err = c.ListTableOfFamily(name, nftables.TableFamilyIPv4)
		has = err == nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return has
}

// TestJobNetOfAGoneVMIsRemoved leaves a VM's job network behind as a
// daemon killed before its VM's record was written would (the network
// recorded and set up, no vm.json): the next daemon's Recover finds the
// VM gone and removes the segment's table, its namespace and its record.
func TestJobNetOfAGoneVMIsRemoved(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	dir := t.TempDir()
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "ul0"}}); err != nil {
		t.Fatal(err)
	}
	node := underlayNode(t, dir, "a", netip.MustParsePrefix("192.0.2.1/24"))
	r := &Runner{cfg: Config{Overlay: netip.MustParseAddrPort("192.0.2.1:4789")}, log: slog.Default(), nodeNS: node}
	n := &api.JobNet{VNI: 33, Addr: netip.MustParsePrefix("10.214.0.1/16"), Members: []api.JobNetMember{
		{Node: "a", Addr: netip.MustParseAddr("10.214.0.1"), Endpoint: "192.0.2.1:4789"},
		{Node: "b", Addr: netip.MustParseAddr("10.214.0.2"), Endpoint: "192.0.2.2:4789"}}}
	jn, _, err := r.planJobNet(&api.Job{ID: 5, Net: n})
	if err != nil {
		t.Fatal(err)
	}
	vmDir := t.TempDir()
	tap, err := r.joinJobNet(vmDir, nil, *jn)
	if err != nil {
		t.Fatal(err)
	}
	tap.Close()
	if !nodeHasTable(t, node, jn.Table) || !hasJobNet(vmDir) {
		t.Fatal("the job network was not set up")
	}
	if _, _, err := r.Recover(vmDir); !errors.Is(err, noded.ErrGone) {
		t.Fatalf("Recover = %v, want ErrGone", err)
	}
	if nodeHasTable(t, node, jn.Table) {
		t.Error("the segment's table is left after the daemon found its VM gone")
	}
	if hasJobNet(vmDir) {
		t.Error("the job network's record is left")
	}
	if _, err := os.Stat(filepath.Join(vmDir, netnsFile)); err == nil {
		t.Error("the job network's own namespace is left")
	}
}
