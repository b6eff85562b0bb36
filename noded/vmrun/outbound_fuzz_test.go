package vmrun

import (
	"net/netip"
	"testing"

	"corral/vmimage"
)

// FuzzGuestNameservers reads any resolv.conf text: every nameserver it
// gives a guest is an IPv4 address outside the blocked ranges, not
// loopback, that the guest's job/fs accepts with the share's gateway.
func FuzzGuestNameservers(f *testing.F) {
	f.Add([]byte("nameserver 127.0.0.53\noptions edns0\n"), []byte("# upstream\nnameserver 10.1.1.1\nnameserver 2001:db8::1\nsearch example\n"))
	f.Add([]byte("nameserver 169.254.169.253\nnameserver 10.213.0.5\n"), []byte("nameserver\tx\n"))
	blocked := []netip.Prefix{netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("169.254.0.0/16")}
	local := []netip.Addr{netip.MustParseAddr("192.168.1.10")}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		got := guestNameservers([][]byte{first, second}, local, blocked)
		for _, ns := range got {
			a, err := netip.ParseAddr(ns)
			if err != nil || !a.Is4() || a.IsLoopback() || inPrefixes(blocked, a) || containsAddr(local, a) {
				t.Fatalf("guestNameservers gave %q (from %q, %q)", ns, first, second)
			}
		}
		fs := vmimage.FS{Kind: vmimage.ShareNFS, Addr: "10.0.2.2", Port: 2049, Export: "/", GuestAddr: "10.0.2.15/24", Gateway: "10.0.2.2", Nameservers: got}
		if len(got) > 0 {
			if err := fs.Validate(); err != nil {
				t.Fatalf("the guest would refuse nameservers %q: %v", got, err)
			}
		}
	})
}
