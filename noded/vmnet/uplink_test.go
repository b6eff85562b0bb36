package vmnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// nodeNetnsEnv tells a test binary it runs as the child of
// inOwnNetns, in a network namespace of its own.
const nodeNetnsEnv = "CORRAL_TEST_NODE_NETNS"

// inOwnNetns runs the calling test again in a child process with a network
// namespace of its own, which plays the node's: the test's rules,
// forwarding and interfaces never touch the machine's own network. It
// returns true in the child (run the test) and false in the parent, once
// the child has passed.
func inOwnNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(nodeNetnsEnv) == t.Name() {
		if l, err := netlink.LinkByName("lo"); err == nil {
			netlink.LinkSetUp(l)
		}
		return true
	}
	needRoot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), nodeNetnsEnv+"="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	t.Logf("in a namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("the test in its own namespace: %v", err)
	}
	return false
}

// serve answers every connection to addr with word, from inside ns (nil:
// the node's namespace), until the test ends.
func serve(t *testing.T, ns *Netns, addr, word string) {
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
			c.Write([]byte(word))
			c.Close()
		}
	}()
}

// dialFrom connects to addr from inside ns and returns what the server
// said.
func dialFrom(ns *Netns, addr string, timeout time.Duration) (string, error) {
	var got []byte
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp4", addr, timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(timeout))
		got, err = io.ReadAll(c)
		return err
	})
	return string(got), err
}

// linkNS joins namespace a (or the node's, when nil) to b with a veth pair
// named an/bn, with addresses aa and ba, and sets b's default route via
// the a side when gw.
func linkNS(t *testing.T, a *Netns, an string, aa netip.Prefix, b *Netns, bn string, ba netip.Prefix, gw bool) {
	t.Helper()
	fd := func(ns *Netns) int {
		f, err := os.Open(ns.Path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return int(f.Fd())
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: an}, PeerName: bn, PeerNamespace: netlink.NsFd(fd(b))}
	if a != nil {
		veth.Namespace = netlink.NsFd(fd(a))
	}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("veth %s-%s: %v", an, bn, err)
	}
	setup := func(name string, addr netip.Prefix, gwv netip.Addr) error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		if gwv.IsValid() {
			g := gwv.As4()
			return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.IP(g[:])})
		}
		return nil
	}
	var err error
	if a == nil {
		err = setup(an, aa, netip.Addr{})
	} else {
		err = a.Do(func() error { return setup(an, aa, netip.Addr{}) })
	}
	if err == nil {
		var gwv netip.Addr
		if gw {
			gwv = aa.Addr()
		}
		err = b.Do(func() error { return setup(bn, ba, gwv) })
	}
	if err != nil {
		t.Fatalf("veth %s-%s: %v", an, bn, err)
	}
}

// addLoopbackAddr gives ns's loopback one more address.
func addLoopbackAddr(t *testing.T, ns *Netns, a string) {
	t.Helper()
	err := ns.Do(func() error {
		l, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(netip.MustParseAddr(a), 32))})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fakeVM is a VM's namespace with a "guest" namespace behind it, joined by
// a veth named like the tap device, so that the guest's side runs
// processes (the test's dials) without QEMU.
type fakeVM struct {
	vm, guest *Netns
	out       Outbound
}

func newFakeVM(t *testing.T, dir string, i int) *fakeVM {
	t.Helper()
	mk := func(name string) *Netns {
		ns, err := Create(filepath.Join(dir, fmt.Sprintf("%s%d", name, i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Remove() })
		return ns
	}
	f := &fakeVM{vm: mk("vm"), guest: mk("guest")}
	linkNS(t, f.vm, "tap0", netip.MustParsePrefix("10.0.2.2/24"), f.guest, "eth0", netip.MustParsePrefix("10.0.2.15/24"), true)
	base := netip.MustParseAddr("10.213.0.0").As4()
	base[3] = byte(4*i + 1)
	host := netip.AddrFrom4(base)
	f.out = Outbound{Table: fmt.Sprintf("corral-vm-%d", i), HostIf: fmt.Sprintf("crl%d", i), NSIf: "uplink0", Tap: "tap0",
		Guest: netip.MustParseAddr("10.0.2.15"), HostAddr: netip.PrefixFrom(host, 30), NSAddr: netip.PrefixFrom(host.Next(), 30),
		Blocked: []netip.Prefix{netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("169.254.0.0/16"),
			netip.MustParsePrefix("198.51.100.8/32")}}
	return f
}

// TestOutboundReachesOnlyTheSite builds a node (the test's own namespace)
// with an "outside" namespace behind its uplink, two VMs' namespaces with a
// guest behind each, and servers on the outside (the site, and a
// controller), on the node's loopback, on all of the node's addresses and
// in the other VM's namespace. The first guest reaches the site's server
// and none of the others; its rules survive being set again, and after
// Remove nothing of them is left.
func TestOutboundReachesOnlyTheSite(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	dir := t.TempDir()
	outside, err := Create(filepath.Join(dir, "outside"))
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Remove()
	linkNS(t, nil, "up0", netip.MustParsePrefix("203.0.113.1/24"), outside, "out0", netip.MustParsePrefix("203.0.113.2/24"), false)
	def := netip.MustParseAddr("203.0.113.2").As4()
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: mustLink(t, "up0"), Gw: net.IP(def[:])}); err != nil {
		t.Fatal(err)
	}
	addLoopbackAddr(t, outside, "198.51.100.7")
	addLoopbackAddr(t, outside, "198.51.100.8")
	serve(t, outside, "198.51.100.7:8080", "site")
	serve(t, outside, "198.51.100.8:7001", "controller")
	serve(t, nil, "127.0.0.1:7002", "node loopback")
	serve(t, nil, "0.0.0.0:7004", "node, every address")

	if err := EnableForwarding("crl"); err != nil {
		t.Fatal(err)
	}
	if ok, err := HasTable(GuardTable); !ok || err != nil {
		t.Fatalf("a node that did not forward has no guard table (%v)", err)
	}
	vm1, vm2 := newFakeVM(t, dir, 1), newFakeVM(t, dir, 2)
	for _, v := range []*fakeVM{vm1, vm2} {
		if err := v.vm.Connect(v.out); err != nil {
			t.Fatal(err)
		}
	}
	serve(t, vm2.vm, "0.0.0.0:9000", "the other VM's namespace")
	if err := vm2.vm.Connect(vm1.out); err == nil || !errors.Is(err, os.ErrExist) {
		t.Fatalf("a second Connect on a taken veth: %v, want an error wrapping os.ErrExist", err)
	}

	check := func(when string) {
		t.Helper()
		if got, err := dialFrom(vm1.guest, "198.51.100.7:8080", 10*time.Second); err != nil || got != "site" {
			t.Fatalf("%s: the guest did not reach the site's server: %q, %v", when, got, err)
		}
		// The controller, the node's uplink address, the node's end of
		// this VM's veth and of the other's, the other VM's namespace,
		// and loopback. The dials run at once: each waits out its
		// timeout when the rules drop it.
		var wg sync.WaitGroup
		for _, addr := range []string{"198.51.100.8:7001", "203.0.113.1:7004", "10.213.0.5:7004",
			"10.213.0.9:7004", "10.213.0.10:9000", "127.0.0.1:7002"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, err := dialFrom(vm1.guest, addr, 3*time.Second); err == nil {
					t.Errorf("%s: the guest reached %s: %q", when, addr, got)
				}
			}()
		}
		wg.Wait()
	}
	check("connected")
	if err := vm1.vm.Restore(vm1.out); err != nil {
		t.Fatal(err)
	}
	check("restored")

	if err := vm1.out.Remove(); err != nil {
		t.Fatal(err)
	}
	if ok, err := HasTable(vm1.out.Table); ok || err != nil {
		t.Fatalf("table %s is left after Remove (%v)", vm1.out.Table, err)
	}
	if HasLink(vm1.out.HostIf) {
		t.Fatalf("veth %s is left after Remove", vm1.out.HostIf)
	}
	if got, err := dialFrom(vm1.guest, "198.51.100.7:8080", 2*time.Second); err == nil {
		t.Fatalf("after Remove the guest still reached the site: %q", got)
	}
	if err := vm1.out.Remove(); err != nil {
		t.Fatalf("a second Remove: %v", err)
	}
	// The other VM was left as it was.
	if got, err := dialFrom(vm2.guest, "198.51.100.7:8080", 10*time.Second); err != nil || got != "site" {
		t.Fatalf("the other guest lost its way out: %q, %v", got, err)
	}
}

// TestForwardGuardKeepsOtherTraffic checks that a node that did not
// forward before its first outbound VM forwards nothing else after it: a
// packet between two of the node's other interfaces is dropped.
func TestForwardGuardKeepsOtherTraffic(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	dir := t.TempDir()
	a, err := Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Remove()
	b, err := Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove()
	linkNS(t, nil, "na", netip.MustParsePrefix("192.0.2.1/24"), a, "a0", netip.MustParsePrefix("192.0.2.2/24"), true)
	linkNS(t, nil, "nb", netip.MustParsePrefix("198.51.100.1/24"), b, "b0", netip.MustParsePrefix("198.51.100.2/24"), true)
	serve(t, b, "198.51.100.2:80", "b")
	if err := EnableForwarding("crl"); err != nil {
		t.Fatal(err)
	}
	fwd, _ := os.ReadFile(ipForward)
	if strings.TrimSpace(string(fwd)) != "1" {
		t.Fatalf("ip_forward = %q after EnableForwarding", fwd)
	}
	if got, err := dialFrom(a, "198.51.100.2:80", 2*time.Second); err == nil {
		t.Fatalf("the node forwarded between two of its other interfaces: %q", got)
	}
}

func mustLink(t *testing.T, name string) int {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}
