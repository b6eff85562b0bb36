// Package nfsd is the file server of a job VM's migratable share: an NFSv3
// and MOUNT v3 server (RFC 1813, ONC RPC over TCP) that gives one job's
// guest its root read-only (the node's /, or its partition's root
// directory) and the job's shared paths read-write, acting as the job's
// user.
//
// It owns the protocol (record marking, the call header, XDR, MOUNT, the
// NFSv3 procedures and the NFSACL side protocol the guest's overlayfs
// needs), the file handles, the mapping of host errors to NFS statuses and
// the acting as the user. It never decides what is exported or for whom
// (the vm runner writes its ProcessConfig), never listens by itself (it
// serves the listener it is given, which the vm runner opens in the VM's
// network namespace, so that only that guest can connect), and never runs
// for more than one VM.
//
// Entry points: New and Server.Serve in a program of one's own;
// RunProcess is `corral nfsd CONFIG`, the process the vm runner starts per
// VM (listener on descriptor 3, exits with its VM's QEMU or on SIGTERM).
//
// # What it promises the guest
//
//   - File handles stay valid across server restarts and on another node.
//     A handle holds the export's id, the identity of the file system the
//     object is on (its type and f_fsid, never the node-local mount id) and
//     the kernel's own handle of the object (name_to_handle_at); decoding
//     is open_by_handle_at on a descriptor of that file system. A restarted
//     server, or the server of the node a VM migrated to (which mounts the
//     same shared file system), decodes the same handle to the same object.
//     Random in-memory handles were measured to give ESTALE on most calls
//     after a migration (VM-NOTES).
//   - Handles cannot be made up. Each carries a MAC (8 bytes of
//     HMAC-SHA256) under the job's handle key, which the vm runner makes
//     once per job and gives every server of the job; any other handle is
//     NFS3ERR_BADHANDLE. Without it a guest could take a file's handle from
//     the read-only root export, write a shared path's export id into it
//     and write the file, anywhere on the node, as the job's user
//     (TestForgedHandlesAreRefused). What the MAC leaves for the kernel's
//     handle is 42 bytes: enough for ext4, xfs and btrfs. An export whose
//     root's handle is longer is refused; an object below it with a longer
//     one (on another file system mounted there) is ENOENT to the guest.
//     The read-only root export may have a key of its own
//     (Config.RootHandleKey): the VMs restored from one warm start's
//     snapshot share it, since the snapshot's guest mounted the root before
//     any job existed, while each job's shared paths keep its own key. A
//     handle still cannot move between exports (the key is the export's),
//     and a root handle one job learnt opens on another job's server only
//     what that job's user may read (knfsd's no_subtree_check: the handle
//     skips the directories' search permission, not the object's own;
//     TestRootHandleKeyOfItsOwn).
//   - Every operation acts as the job's user, whatever the guest's
//     credentials say: each worker thread takes the user's fsuid, fsgid and
//     supplementary groups once (setfsuid, setfsgid and setgroups on the
//     thread only), so the host checks every access and records every
//     owner as that user. A guest that became root inside its VM is still
//     only the user on the node. Root is taken back for three steps
//     alone: decoding a handle (open_by_handle_at needs
//     CAP_DAC_READ_SEARCH), the owner's override of a file's mode that NFS
//     servers grant, and opening a file to sync it for COMMIT (which grants
//     no access).
//   - Stable writes are stable: WRITE with DATA_SYNC or FILE_SYNC
//     fdatasyncs or fsyncs before it answers, and COMMIT fsyncs. UNSTABLE
//     writes are answered once written (the page cache has them) with a
//     write verifier that changes with every server process, so a client
//     sends again, on the next server, whatever it wrote UNSTABLE and had
//     not committed when the old one went away. That is what makes a
//     killed and restarted server a stall and not a loss (tested in
//     noded/vmrun: TestFileServerRestartIsAStall).
//   - Errors are the host's: each errno maps to its NFS status (EACCES to
//     NFS3ERR_ACCES, EROFS for the read-only root, ESTALE for a handle that
//     no longer decodes, …), so the guest sees what the host said.
//   - Exclusive create (EXCLUSIVE CREATE with the client's verifier kept in
//     the file's times, as the kernel's server does), so O_EXCL works and a
//     retransmitted CREATE finds its own file.
//
// Who may connect is decided by where the listener is: the VM's network
// namespace holds only the tap device to its guest (noded/vmnet), so no
// other guest and no local user of the node reaches the socket.
//
// # Why a server of its own
//
// The issue asked for a well-kept server (nfs-ganesha, or a Go NFS library
// fixed and wrapped) before a home-made one. What was found:
//
//   - github.com/willscott/go-nfs (v0.0.4, the Go library there is), as
//     shipped and measured in a guest (VM-NOTES): WRITE answers FILE_SYNC
//     without syncing; every file is created as the server's uid (a guest
//     user got a root-owned file); EACCES becomes status 524; EXCLUSIVE
//     create is refused; its default handles are random and in memory
//     (ESTALE after a migration). The first three cannot be fixed from
//     outside: its procedure handlers take an unexported response type and
//     hard-code the status of each failure, so wrapping it means forking
//     it, and its billy.Filesystem layer has no notion of acting as a user
//     or of kernel handles, which are the two things this server is about.
//   - nfs-ganesha 4.3 (Debian bookworm, VFS FSAL) has kernel handles (the
//     VFS FSAL is built on name_to_handle_at/open_by_handle_at) and real
//     syncs. Against it, for this use: it registers its programs with
//     rpcbind at start (started in an empty network namespace without one,
//     it logged "Cannot register NFS V3 on TCP" and listened on nothing),
//     wants a
//     D-Bus system bus for its control interface, and is one daemon per
//     node designed for many clients; per VM it would need its own
//     namespace, rpcbind and configuration, or one daemon per node with an
//     export per VM and client address (then every guest's address must
//     differ, which the same-everywhere guest network here avoids so that
//     a migrated VM keeps its address). Its identity model is squashing
//     (Squash = All with Anonymous_Uid/Gid, or trusting the guest's
//     AUTH_SYS credentials, as virtiofs does); the user's supplementary
//     groups need its Manage_Gids lookup of the uid on the node. It was
//     not measured in a guest: the rpcbind and namespace set-up above was
//     not built, so no throughput figure of it exists here.
//   - The kernel's own NFS server cannot act per VM as one user, exports
//     per client address in one namespace, and is shared by the whole node.
//
// The protocol part of NFSv3 that one guest needs is small (the procedures
// are in nfs3_linux.go, dirops_linux.go, io_linux.go and readdir_linux.go),
// and every decoder of what a guest sends is fuzzed (fuzz_test.go). What
// would make a well-kept server worth its set-up: a guest workload this
// server is slow at, or NFSv4 (delegations), which the migration of a VM
// with open state would then have to carry.
//
// # Throughput
//
// Requests are read per connection and run on Config.Workers threads (8 by
// default), each with the user's credentials; replies to one connection are
// serialised. READ and WRITE move up to 1 MiB (rtmax = wtmax = 1 MiB, which
// the guest's client takes as its rsize and wsize). Figures through the
// share, against virtiofs: docs/performance.md.
package nfsd
