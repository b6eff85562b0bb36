//go:build !corral_client

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"

	"corral/api"
	"corral/noded/vmrun"
)

// vxlanPort is the UDP port IANA assigned to VXLAN (RFC 7348).
const vxlanPort = 4789

// overlayOption reads noded's --overlay: "none" offers no job network,
// ADDR:PORT is the node's endpoint, and no value takes defaultOverlay's.
func overlayOption(ctx context.Context, v string, controllers []string, log *slog.Logger) (netip.AddrPort, error) {
	switch v {
	case "none":
		log.Info("this node offers no network to multi-node jobs' VMs (--overlay none)")
		return netip.AddrPort{}, nil
	case "":
		return defaultOverlay(ctx, controllers, log), nil
	}
	ep, err := api.ParseOverlay(v)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("--overlay=%s: %w, or none", v, err)
	}
	return ep, nil
}

// defaultOverlay is the node's overlay endpoint when --overlay names none:
// the address this host's routes pick toward the first controller, on the
// VXLAN port. Every controller must reach the node there anyway, so it is
// the node's address on the network between the nodes unless the site
// separates the two (then --overlay names the other). A first controller
// on loopback (a test cluster, whose nodes share a host and would share
// the port) gives none: such nodes need an --overlay each, with a port
// of their own.
func defaultOverlay(ctx context.Context, controllers []string, log *slog.Logger) netip.AddrPort {
	if len(controllers) == 0 {
		return netip.AddrPort{} // corral dev: its nodes get endpoints of their own
	}
	ep, err := overlayToward(ctx, controllers[0])
	if err != nil {
		log.Info("this node offers no network to multi-node jobs' VMs: give it --overlay ADDR:PORT", "reason", err)
		return netip.AddrPort{}
	}
	log.Info("multi-node jobs' networks use the node's address toward the controllers (--overlay chooses another)", "overlay", ep)
	return ep
}

// overlayToward returns the IPv4 address the host sends from to the
// controller at controller (a URL, or HOST:PORT), on the VXLAN port. A
// UDP "dial" only asks the kernel for a route; it sends nothing.
func overlayToward(ctx context.Context, controller string) (netip.AddrPort, error) {
	host := controller
	if u, err := url.Parse(controller); err == nil && u.Host != "" {
		host = u.Hostname()
	} else if h, _, err := net.SplitHostPort(controller); err == nil {
		host = h
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp4", net.JoinHostPort(host, strconv.Itoa(vxlanPort)))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("no IPv4 route to the controller %s: %w", controller, err)
	}
	defer conn.Close()
	a := conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	if a.IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("the controller %s is on loopback", controller)
	}
	return netip.AddrPortFrom(a, vxlanPort), nil
}

// devOverlay returns the dev node's vm runner: r's, with an overlay
// endpoint of its own on loopback (a free UDP port), where the dev
// cluster's multi-node jobs' networks run between its nodes.
func devOverlay(r *vmrun.Runner) (*vmrun.Runner, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("a port for the dev node's job networks: %w", err)
	}
	ep := c.LocalAddr().(*net.UDPAddr).AddrPort()
	c.Close()
	return r.ForNode(netip.AddrPortFrom(ep.Addr().Unmap(), ep.Port()))
}
