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
// It never decides addresses or what listens (the vm runner does) and never
// starts processes.
//
// Entry points: Create (or Open for one a previous daemon made), then
// Netns.Tap for QEMU's -netdev tap,fd=N and Netns.Listen for the server.
package vmnet
