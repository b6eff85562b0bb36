package vmrun

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"corral/api"
	"corral/internal/procref"
	"corral/noded"
	"corral/noded/vmnet"
	"corral/vmimage"
)

// TestOutboundAt checks the slots of the transit range: slot i is the /30
// at 4*i, the node's end first, and every VM blocks the whole range, the
// always-blocked ranges and the controllers.
func TestOutboundAt(t *testing.T) {
	ctl := netip.MustParsePrefix("192.0.2.10/32")
	o := outboundAt(netip.MustParsePrefix("10.213.0.0/16"), 70, []netip.Prefix{ctl})
	if o.HostAddr != netip.MustParsePrefix("10.213.1.25/30") || o.NSAddr != netip.MustParsePrefix("10.213.1.26/30") {
		t.Errorf("slot 70: %v and %v, want 10.213.1.25/30 and 10.213.1.26/30", o.HostAddr, o.NSAddr)
	}
	if o.HostIf != "crl70" || o.Table != "corral-vm-70" || o.NSIf != nsIfName || o.Tap != tapName || o.Guest != guestAddr.Addr() {
		t.Errorf("slot 70 names: %+v", o)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("127.0.0.0/8"), ctl}
	if !reflect.DeepEqual(o.Blocked, want) {
		t.Errorf("blocked %v, want %v", o.Blocked, want)
	}
	if err := o.Check(); err != nil {
		t.Error(err)
	}
}

// TestGuestNameservers checks which of the node's resolvers a guest gets:
// IPv4 ones it can reach, from the first file that has any.
func TestGuestNameservers(t *testing.T) {
	local := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	blocked := []netip.Prefix{netip.MustParsePrefix("10.213.0.0/16")}
	cases := map[string]struct {
		confs []string
		want  []string
	}{
		"plain servers":      {[]string{"search site\nnameserver 198.51.100.53\nnameserver 198.51.100.54\n"}, []string{"198.51.100.53", "198.51.100.54"}},
		"a local stub first": {[]string{"nameserver 127.0.0.53\n", "nameserver 198.51.100.53\n"}, []string{"198.51.100.53"}},
		"the node's own address and a blocked one": {
			[]string{"nameserver 192.0.2.1\nnameserver 10.213.0.1\nnameserver 198.51.100.53\n"}, []string{"198.51.100.53"}},
		"IPv6 only":  {[]string{"nameserver 2001:db8::53\n"}, nil},
		"no servers": {[]string{"# empty\n"}, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var confs [][]byte
			for _, s := range c.confs {
				confs = append(confs, []byte(s))
			}
			if got := guestNameservers(confs, local, blocked); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestCheckNetwork checks that the node network is refused where the VM
// would have no card for it.
func TestCheckNetwork(t *testing.T) {
	if err := checkNetwork(api.NetworkNode, nfsFS("", nil)); err != nil {
		t.Error(err)
	}
	if err := checkNetwork(api.NetworkNone, nil); err != nil {
		t.Error(err)
	}
	if err := checkNetwork(api.NetworkNode, &vmimage.FS{Kind: vmimage.ShareVirtiofs, Tag: hostTag}); err == nil || !strings.Contains(err.Error(), "--no-migrate") {
		t.Errorf("node network over virtiofs: %v", err)
	}
	if err := checkNetwork(api.NetworkNode, nil); err == nil || !strings.Contains(err.Error(), "host's root") {
		t.Errorf("node network without the host's root: %v", err)
	}
}

// nodeNetnsEnv tells a test binary it runs as the child of inOwnNetns.
const nodeNetnsEnv = "CORRAL_TEST_NODE_NETNS"

// inOwnNetns runs the calling test again in a child process with a network
// namespace of its own, which plays the node's: the rules, forwarding and
// interfaces of the test never touch the machine's own network. The child
// restores the parent's probe rather than booting its own. It returns
// true in the child (run the test), false in the parent once the child
// passed.
func inOwnNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(nodeNetnsEnv) == t.Name() {
		if l, err := netlink.LinkByName("lo"); err == nil {
			netlink.LinkSetUp(l)
		}
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	found, err := testRunner(t).Probe(t.Context()) // skips without QEMU or an image
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), nodeNetnsEnv+"="+t.Name(), probeEnv+"="+string(found))
	if d, err := filepath.Abs(imageRoot()); err == nil {
		cmd.Env = append(cmd.Env, "CORRAL_IMAGE_ROOT="+d)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	t.Logf("in a namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("the test in its own namespace: %v", err)
	}
	return false
}

// siteNet builds the site around the node (the test's namespace): an
// "outside" namespace behind the node's uplink (203.0.113.1, default
// route via .2) holding a site server (198.51.100.7:8080) and a
// controller (198.51.100.8:7001), and servers on the node's loopback
// (127.0.0.1:7002) and on all its addresses (7004).
func siteNet(t *testing.T) {
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
	addr := func(dev, a string) error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		p, _ := netlink.ParseIPNet(a)
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: p}); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}
	if err := addr("up0", "203.0.113.1/24"); err != nil {
		t.Fatal(err)
	}
	l, _ := netlink.LinkByName("up0")
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP("203.0.113.2")}); err != nil {
		t.Fatal(err)
	}
	err = outside.Do(func() error {
		if err := addr("out0", "203.0.113.2/24"); err != nil {
			return err
		}
		if err := addr("lo", "198.51.100.7/32"); err != nil {
			return err
		}
		return addr("lo", "198.51.100.8/32")
	})
	if err != nil {
		t.Fatal(err)
	}
	serveWord(t, outside, "198.51.100.7:8080", "site")
	serveWord(t, outside, "198.51.100.8:7001", "controller")
	serveWord(t, nil, "127.0.0.1:7002", "node-loopback")
	serveWord(t, nil, "0.0.0.0:7004", "node-address")
}

func serveWord(t *testing.T, ns *vmnet.Netns, addr, word string) {
	t.Helper()
	var l net.Listener
	var err error
	if ns == nil {
		l, err = net.Listen("tcp4", addr)
	} else {
		l, err = ns.Listen(addr)
	}
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(word + "\n"))
			c.Close()
		}
	}()
}

// probeScript asks, from inside the guest, each of the site's and the
// node's servers for its word, all at once (a dropped connection waits
// out its timeout), and prints the guest's resolv.conf.
const probeScript = `#!/bin/bash
probe() { timeout 8 bash -c "exec 3<>/dev/tcp/$1/$2 && cat <&3" 2>/dev/null || echo "unreached $1:$2"; }
i=0
for t in 198.51.100.7:8080 198.51.100.8:7001 203.0.113.1:7004 127.0.0.1:7002 10.0.2.2:7004 10.0.2.2:7002; do
	probe ${t%:*} ${t#*:} > /tmp/probe$i & i=$((i+1))
done
wait
cat /tmp/probe*
awk '$2 == "00000000" { print "default route" }' /proc/net/route
echo "--- resolv.conf"
cat /etc/resolv.conf
`

// hostTables lists the VMs' tables in the node's namespace.
func hostTables(t *testing.T, outs ...vmnet.Outbound) []string {
	t.Helper()
	var have []string
	for _, o := range outs {
		ok, err := vmnet.HasTable(o.Table)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			have = append(have, o.Table)
		}
	}
	return have
}

func readOutbound(t *testing.T, dir string) vmnet.Outbound {
	t.Helper()
	var o vmnet.Outbound
	if err := procref.ReadJSON(filepath.Join(dir, outboundFile), &o); err != nil {
		t.Fatalf("the VM's outbound record: %v", err)
	}
	return o
}

// TestNetworkNode runs real VMs in a node with a site around it (siteNet):
// a job of a partition whose network is node reaches the site's server,
// and not the controller, the node's address, the node's loopback or any
// port of its file server's address but the server's; it has a default
// route and the node's nameservers. Its rules are gone once it ended. A
// job whose network is none reaches nothing, and keeps the host's
// resolv.conf.
func TestNetworkNode(t *testing.T) {
	guestOnly(t)
	if !inOwnNetns(t) {
		return
	}
	siteNet(t)
	r := testRunner(t)
	r.cfg.Controllers = []string{"http://198.51.100.8:7001"}

	spec := jobSpec(t, probeScript, 1, 256)
	spec.Network = api.NetworkNode
	v := start(t, r, spec)
	o := readOutbound(t, spec.Dir)
	if got := hostTables(t, o); len(got) != 1 {
		t.Errorf("while the VM runs the node has no table %s", o.Table)
	}
	res := waitResult(t, v, 2*time.Minute)
	out := readFile(t, spec.Stdout)
	if res.ExitCode != 0 {
		t.Fatalf("result %+v, output:\n%s\nconsole: %s", res, out, tailFile(filepath.Join(spec.Dir, consoleFile), 10, 2000))
	}
	t.Logf("node network:\n%s", out)
	want := []string{"site", "default route", "unreached 198.51.100.8:7001", "unreached 203.0.113.1:7004", "unreached 127.0.0.1:7002",
		"unreached 10.0.2.2:7004", "unreached 10.0.2.2:7002"}
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("node network: output lacks %q", w)
		}
	}
	if strings.Contains(out, "controller") || strings.Contains(out, "node-") {
		t.Errorf("node network: the guest reached the controller or the node:\n%s", out)
	}
	if ns := nodeNameservers(nil); len(ns) > 0 && !strings.Contains(out, "nameserver "+ns[0]) {
		t.Errorf("node network: the guest's resolv.conf lacks the node's nameserver %s", ns[0])
	}
	waitFor(t, "the VM's rules to go", 30*time.Second, func() bool { return len(hostTables(t, o)) == 0 && !vmnet.HasLink(o.HostIf) })
	if _, err := os.Stat(filepath.Join(spec.Dir, outboundFile)); err == nil {
		t.Error("the outbound record is left after the VM ended")
	}

	spec = jobSpec(t, probeScript, 1, 256)
	v = start(t, r, spec)
	res = waitResult(t, v, 2*time.Minute)
	out = readFile(t, spec.Stdout)
	t.Logf("no network:\n%s", out)
	if res.ExitCode != 0 || !strings.Contains(out, "unreached 198.51.100.7:8080\n") || strings.Contains(out, "site\n") || strings.Contains(out, "default route") {
		t.Errorf("network none: result %+v, the guest reached the site or failed:\n%s", res, out)
	}
	if strings.Contains(out, "The node's nameservers") {
		t.Errorf("network none: the guest got a resolv.conf of its own:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(spec.Dir, outboundFile)); err == nil {
		t.Error("network none: the VM got an outbound network")
	}
}

// The environment of TestHelperNetDaemon.
const helperNetDir = "VMRUN_HELPER_NET_DIR"

// TestHelperNetDaemon is not a test: run by TestNetworkNodeAfterRestart in
// its namespace, it starts one VM of the node network that waits for a
// file named go in its directory before it asks the site's server, says
// so, and waits to be killed.
func TestHelperNetDaemon(t *testing.T) {
	dir := os.Getenv(helperNetDir)
	if dir == "" {
		t.Skip("helper process of TestNetworkNodeAfterRestart")
	}
	tsc, _ := strconv.Atoi(os.Getenv(helperTSC))
	r, err := unprobedRunner(os.Getenv(helperAccel), tsc)
	if err != nil {
		t.Fatal(err)
	}
	r.cfg.Controllers = []string{"198.51.100.8:7001"}
	spec := jobSpec(t, `#!/bin/bash
echo begun
while [ ! -e `+dir+`/go ]; do sleep 0.2; done
timeout 8 bash -c "exec 3<>/dev/tcp/198.51.100.7/8080 && cat <&3" || echo unreached
`, 1, 256)
	spec.Dir, spec.Stdout, spec.WorkDir, spec.Shares = dir, filepath.Join(dir, "out.txt"), dir, []string{dir}
	spec.Network = api.NetworkNode
	if _, err := r.Start(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to start", 2*time.Minute, func() bool {
		return strings.Contains(readFile(t, spec.Stdout), "begun")
	})
	fmt.Println("VM STARTED")
	select {}
}

// startNetHelper runs TestHelperNetDaemon for dir until its VM runs, then
// kills it, as a node daemon killed with SIGKILL.
func startNetHelper(t *testing.T, r *Runner, dir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNetDaemon$", "-test.v")
	cmd.Env = append(os.Environ(), helperNetDir+"="+dir, helperAccel+"="+r.Accel(), helperTSC+"="+strconv.Itoa(r.tscKHz))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "VM STARTED" {
				started <- true
				return
			}
		}
		started <- false
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatal("the stand-in daemon ended without starting its VM")
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the stand-in daemon did not start its VM")
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// TestNetworkNodeAfterRestart kills a daemon whose node-network VM runs:
// the VM's rules stay, a new daemon re-adopts them with the VM (which
// then reaches the site), and they are gone when it ends. A second VM
// whose QEMU dies while no daemon runs has its rules removed by the
// daemon that finds it gone.
func TestNetworkNodeAfterRestart(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	siteNet(t)
	r := testRunner(t)
	dir := t.TempDir()
	startNetHelper(t, r, dir)
	o := readOutbound(t, dir)
	if len(hostTables(t, o)) != 1 || !vmnet.HasLink(o.HostIf) {
		t.Fatalf("the VM's table %s or veth %s went with the daemon", o.Table, o.HostIf)
	}
	h, res, err := r.Recover(dir)
	if err != nil || res != nil || h == nil {
		t.Fatalf("Recover = %v, %+v, %v; want a handle", h, res, err)
	}
	if len(hostTables(t, o)) != 1 {
		t.Fatalf("the re-adopted VM has no table %s", o.Table)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	v := h.(*VM)
	got := waitResult(t, v, 2*time.Minute)
	out := readFile(t, filepath.Join(dir, "out.txt"))
	if got.ExitCode != 0 || !strings.Contains(out, "site\n") {
		t.Errorf("the re-adopted VM: result %+v, output %q; want it to reach the site", got, out)
	}
	waitFor(t, "the re-adopted VM's rules to go", 30*time.Second, func() bool { return len(hostTables(t, o)) == 0 && !vmnet.HasLink(o.HostIf) })

	dir2 := t.TempDir()
	startNetHelper(t, r, dir2)
	o2 := readOutbound(t, dir2)
	var st vmState
	if err := procref.ReadJSON(filepath.Join(dir2, stateFile), &st); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(st.PID, syscall.SIGKILL)
	waitFor(t, "QEMU to die", 30*time.Second, func() bool {
		ps, err := procref.ReadStat(st.PID)
		return err != nil || ps.Start != st.Start || ps.Ended()
	})
	if _, _, err := r.Recover(dir2); !errors.Is(err, noded.ErrGone) {
		t.Fatalf("Recover of a VM that died meanwhile = %v, want ErrGone", err)
	}
	if len(hostTables(t, o2)) != 0 || vmnet.HasLink(o2.HostIf) {
		t.Errorf("the rules of a VM that died while no daemon ran are left: table %s, veth %s", o2.Table, o2.HostIf)
	}
}
