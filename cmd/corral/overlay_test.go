//go:build !corral_client

package main

import (
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// hostIPv4 returns an IPv4 address of this host other than loopback's,
// or skips the test.
func hostIPv4(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			return p.Addr()
		}
	}
	t.Skip("this host has no IPv4 address besides loopback's")
	return netip.Addr{}
}

// TestOverlayOption reads noded's --overlay: an endpoint given, none,
// and the default, the address this host reaches the first controller
// from (none toward loopback, where a test cluster's nodes share a host).
func TestOverlayOption(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for name, c := range map[string]struct {
		value       string
		controllers []string
		want        string // the endpoint, "" for none
		err         string
	}{
		"given":                        {value: "192.0.2.1:4790", controllers: []string{"http://127.0.0.1:7001"}, want: "192.0.2.1:4790"},
		"none":                         {value: "none", controllers: []string{"http://127.0.0.1:7001"}},
		"a controller on loopback":     {controllers: []string{"http://127.0.0.1:7001"}},
		"no controller (corral dev)":   {},
		"an IPv6 controller":           {controllers: []string{"http://[::1]:7001"}},
		"without a port":               {value: "192.0.2.1", err: "--overlay=192.0.2.1: overlay endpoint"},
		"IPv6":                         {value: "[2001:db8::1]:4789", err: "IPv4 address"},
		"port 0":                       {value: "192.0.2.1:0", err: "a UDP port"},
		"unspecified":                  {value: "0.0.0.0:4789", err: "or none"},
		"a name":                       {value: "node1:4789", err: "--overlay=node1:4789"},
		"only the first controller":    {controllers: []string{"http://127.0.0.1:7001", "http://192.0.2.1:7001"}},
		"a controller given host:port": {value: "", controllers: []string{"127.0.0.1:7001"}},
	} {
		t.Run(name, func(t *testing.T) {
			ep, err := overlayOption(t.Context(), c.value, c.controllers, log)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("--overlay=%q: %v, want an error with %q", c.value, err, c.err)
				}
				return
			}
			got := ""
			if ep.IsValid() {
				got = ep.String()
			}
			if err != nil || got != c.want {
				t.Errorf("--overlay=%q, controllers %v: %q, %v; want %q", c.value, c.controllers, got, err, c.want)
			}
		})
	}
	// Toward an address of this host the route's source is that address:
	// the default is the node's own address on the VXLAN port.
	a := hostIPv4(t)
	for _, ctl := range []string{"http://" + a.String() + ":7001", a.String() + ":7001", "https://" + a.String()} {
		ep, err := overlayOption(t.Context(), "", []string{ctl}, log)
		if want := netip.AddrPortFrom(a, vxlanPort); err != nil || ep != want {
			t.Errorf("the default toward %s: %v, %v; want %v", ctl, ep, err, want)
		}
	}
}
