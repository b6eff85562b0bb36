// Package vmnet gives a job VM its network: a network namespace of its own,
// kept by a bind mount in the VM's state directory, holding one tap device
// whose other end is the VM's virtio-net card, and the listeners of the
// services the node offers that guest (its file server) inside that
// namespace.
//
// The namespace is what confines the guest: it holds only the tap device
// and a loopback, forwards nothing and has no route out, so the guest
// reaches the sockets opened inside it and nothing else: not the node's
// loopback services, not the controllers, not another job's guest or file
// server (each VM has its own namespace, with the same addresses). A local
// user of the node cannot reach those sockets either: entering another
// process's network namespace needs CAP_SYS_ADMIN.
//
// A partition whose network is "node" gives the namespace a way out
// (Outbound): a veth pair to the node's namespace, the guest's traffic
// translated in the namespace and masqueraded by the node, and netfilter
// tables of the VM's own on both sides (Outbound.HostTable, NSTable: pure
// functions of the VM's names and addresses) that keep the guest from the
// node's own addresses, the controllers and the other VMs. The tables are
// set through nf_tables' netlink interface (github.com/google/nftables),
// one per VM, replaced in one transaction, so that setting them again is
// harmless and no rule of the node's own is touched.
//
// A multi-node job's VM also joins its job's private network (JobNet,
// jobnet.go): a VXLAN segment of the job's own between its nodes, with
// unicast peers only. The VXLAN device is made from the node's namespace
// (its UDP socket stays there, on the underlay) directly into the VM's,
// where a bridge joins it to a second tap device, the guest's second card.
// The node's table for the segment (JobNet.NodeTable) accepts its
// datagrams from the job's peers only; a bridge table in the VM's
// namespace (VMTable) keeps the namespace's own stack off the segment.
// Forwarding entries are static (each peer's card MAC, CardMAC, at its
// node's endpoint), written with one raw netlink request each, since
// vishvananda/netlink's neighbour has no destination port.
//
// The node's side of both (the way out, the job network) is the caller's
// namespace, or one the caller names (a *Netns, nil for its own), so that
// several nodes can share a host (tests, corral dev).
//
// It never decides addresses or what listens (the vm runner does) and never
// starts processes.
//
// Entry points: Create (or Open for one a previous daemon made), then
// Netns.Tap for QEMU's -netdev tap,fd=N and Netns.Listen for the server;
// for a way out EnableForwarding, Netns.Connect (Netns.Restore in a
// restarted daemon) and Outbound.Remove; for a job's network
// Netns.JoinJobNet, Netns.SetJobNetPeers (peers that moved, or a
// restarted daemon) and Netns.LeaveJobNet.
package vmnet
