// Package vmrun is the node daemon's vm runner: it runs every job in a QEMU
// virtual machine of its own, KVM where it works and TCG elsewhere, and
// implements noded.Runner beside the process runner.
//
// It owns the QEMU side of a job VM: choosing the accelerator (a test boot
// at New, never /dev/kvm alone), measuring QEMU's memory overhead per VM,
// building the command line of vmimage's host contract, starting QEMU in a
// session of its own, watching and killing it, pausing and resuming it over
// QMP (github.com/digitalocean/go-qemu), re-attaching to VMs a previous
// daemon started, and turning the guest's control lines into a
// noded.Result. The guest side (images, payload format, kernel command
// line, serial ports, control protocol) belongs to corral/vmimage; this
// package only follows it.
//
// It never decides whether a job may run, how much of the node it gets, what
// state it ends in, or who may reach into it: the daemon does. It never removes a
// job's state directory (the daemon does) but does remove the two files
// that must not outlive the VM, the QMP socket and the per-job initrd. It
// never uses 9p, and gives a guest no network but its own file server's,
// unless the job's partition says network node (LaunchSpec.Network,
// outbound.go): the NFS share's namespace then gets a way out through
// the node (vmnet.Outbound) in a slot of the transit range, recorded in
// the state directory so that Recover sets its rules again or removes
// them, and the guest a default route and the node's nameservers. A VM
// of a multi-node job (its job's api.JobNet) also joins the job's private
// network (jobnet.go, vmnet.JobNet): a second card on a tap device of its
// own in the VM's namespace (made for it when the VM has no NFS share),
// bridged there to the job's VXLAN segment whose node side is the node's
// overlay endpoint (Config.Overlay) in the node's namespace
// (Config.NodeNetns, the daemon's own by default), recorded in
// jobnet.json for Recover and torn down when QEMU exits; the guest gets
// its address and the job's hosts in its payload.
//
// A VM whose image can take the host's root (vmimage.Image.HostRoot) gets
// it, with the job's shared paths, over one of two shares
// (LaunchSpec.Share, which the daemon sets from the job's --no-migrate and
// its partition's share):
//
//   - NFS, the default, which QEMU can live-migrate (nfsshare.go): per VM a
//     network namespace with a tap device (guestnet.go, noded/vmnet), the
//     VM's virtio-net card on it, and a file server of its own (`corral
//     nfsd`, noded/nfsd) on a listener in that namespace, started once QEMU
//     runs, restarted when it dies (the guest's hard mount stalls and
//     retries), ended with the VM and re-adopted by Recover. Its root
//     export is the node's / or the partition's root directory
//     (LaunchSpec.Root).
//   - virtiofs (share.go): one virtiofsd per VM, started before QEMU in a
//     session of its own; faster, but QEMU 7.2 cannot migrate a VM with it
//     (MigrationBlockers says so).
//
// The design and the trade-off between them are in docs/vm.md. Each VM's
// QEMU and its file server or virtiofsd run in a cgroup of their own when
// the host has them (noded/cgroup), whose CPU time and peak memory the VM's
// Usage reports.
//
// Every VM whose image runs the guest agent (image protocol 3) gets its
// port, a virtio-serial port on a socket QEMU serves (DIR/agent.sock), and
// *VM implements noded.JobAgent through it (agent.go, agentvm.go): exec,
// signals and files in the guest, for the node's job API. The client opens
// a session per connection (a Hello with a fresh nonce, repeated until the
// guest answers it), multiplexes requests by id over it, and opens a new
// one when the old one broke: a VM a restarted daemon re-attached to, or a
// migrated VM once retarget names the destination's socket (tested with a
// real loopback migration). Requests of a broken session fail; the guest
// abandons them too. The protocol is vmimage's ("The guest agent").
//
// A VM can also take its guest from a QEMU migration stream instead of
// booting it (incoming.go): startOpts.incoming starts the same job's QEMU
// with the same device model and -incoming (a stream file the daemon
// opened, handed over as a descriptor, or "defer": a stream handed over
// later on QMP), with the image's base initramfs as -initrd and, for a
// live migration's destination, the job's output files opened for
// appending, its vCPUs held stopped (-S) and its source's handle keys
// (given at start, or arriving with the stream: Incoming.HoldShare holds
// the file server until then). QMP sessions that pass a descriptor
// (getfd) go through one small client of QMP's line protocol (qmpConn,
// outgoing.go); VM.saveState writes a VM's stream to a file the daemon
// opened.
//
// Live migration (noded.LiveMigrator, noded.MigrationSource,
// noded.MigrationDestination) is built on that: Runner.StartIncoming
// (destination.go) starts the destination with -incoming defer and -S and
// starts QEMU's incoming migration on its end of a socket pair; VM.Receive
// takes the source's prelude (its handle keys), starts the held file
// server with them and copies the stream into the socket pair, so QEMU
// listens on no address and opens no file; the VM stays stopped after the
// load until the daemon continues it. VM.MigrateOut (migrate.go) raises
// the bandwidth, sets the downtime limit and auto-converge, starts QEMU's
// migration on a socket pair and copies it to the daemon's stream, with a
// bound on the whole; ResumeAfterMigration cancels or undoes one that was
// aborted (cont from postmigrate). The daemons carry the stream between
// nodes (noded's migration.go).
//
// Warm starts (warm.go, warmpool.go, warmsnap.go, warmstart.go; the
// design is in docs/vm.md): with Config.WarmDir set, Start restores a
// job's VM from its shape's snapshot when the node has one, instead of
// booting it. A shape (warmShapeOf) is the job's QEMU command line (keyArgv:
// without -name and the warm flag), the contents of the image's kernel and
// initramfs and of QEMU, the guest's stage and the partition's root; a job
// of the virtiofs share, with devices passed through, of an image before
// protocol 4, or with LaunchSpec.NoWarm has none and boots. The first job
// of a shape boots and asks for its snapshot: the pool (warmPool) makes
// it in the background, one at a time (makeSnapshot: the shape's VM booted
// with corral.warm=STAGE, its file server acting as nobody, READY, settled,
// paused, saved with saveState to a 0600 file of the daemon's), keeps at
// most Config.WarmMax of them within Config.WarmMaxBytes, least recently
// used first out, checks each before use (size, time) and at Load (its
// SHA-256), and removes one that is stale, damaged or failed a restore. A
// restore (restore) is the same job's start with Incoming{File: the
// snapshot}, the snapshot's root handle key for the file server and a
// fresh one for the job's shares; once QEMU loaded the stream the VM is
// continued and sendJob hands the guest its job over the agent
// (vmimage.FrameJob: host randomness, the clock, the payload a booted VM's
// initrd would hold). Any failure on the way falls back to booting. Close
// (noded.Closer) abandons a snapshot being made when the daemon stops.
//
// Entry point: New, then Runner.Start and Runner.Recover. The handles are
// *VM, which also offer Pause, Continue and Paused for suspend/resume,
// VCPUThreads for pinning, and Exec, Signal, ReadFile and WriteFile.
//
// # A job VM's life
//
//	Start: a uid/gid of the VM range for QEMU (identity.go)
//	       initrd = image base + payload   -> DIR/job.initrd (0400, that uid's)
//	       open the output files as the job's user, truncating (Slurm's default)
//	       open or bind every file and socket QEMU needs (qemufiles.go), as fds 3..12:
//	       qemu-system-x86_64 -M microvm -accel A -cpu max|host -m MEM -smp N
//	         -nodefaults -no-user-config -display none -no-reboot -name guest=corral:DIR,...
//	         -add-fd fd=6,set=6 -chardev file,id=con,path=/dev/fdset/6,append=on -serial chardev:con  (DIR/console.log)
//	         -add-fd fd=7,... -chardev file,id=out,... -device isa-serial,chardev=out,...  (STDOUT, ttyS1)
//	         -add-fd fd=8,... -chardev file,id=err,... -device isa-serial,chardev=err,...  (STDERR, ttyS2, only when != STDOUT)
//	         -add-fd fd=9,... -chardev file,id=ctl,... -device isa-serial,chardev=ctl,...  (DIR/control, ttyS3)
//	         -chardev socket,id=qmp,fd=10,server=on,wait=off -mon chardev=qmp,mode=control  (DIR/qmp.sock)
//	         -device virtio-serial-device -chardev socket,id=agent,fd=11,server=on,wait=off  (DIR/agent.sock)
//	         -device virtserialport,chardev=agent,name=corral.agent                 (the guest agent)
//	         -global virtio-mmio.force-legacy=false
//	         -netdev tap,id=share,fd=3,vhost=off -device virtio-net-device,...      (NFS: the tap in DIR/netns)
//	         -netdev tap,id=job,fd=14,vhost=off -device virtio-net-device,...       (a multi-node job's network)
//	         | -chardev socket,id=vfs,fd=12 -device vhost-user-fs-device           (virtiofs: a connection to DIR/virtiofs.sock)
//	         -kernel /proc/self/fd/4 -initrd /proc/self/fd/5                        (IMAGE/vmlinux, DIR/job.initrd)
//	         -append "console=ttyS0 ... tsc_early_khz=HOST_KHZ corral.hostname=NODE corral.agent=1"
//	       (setsid, as that uid, no_new_privs; pid + start time + argv + uid + agent socket
//	        -> DIR/vm.json; wait for QMP)
//	       NFS: `corral nfsd DIR/nfsd.conf` on the namespace's listener -> DIR/nfsd.json
//	Wait:  QEMU exits -> DIR/control: CORRAL EXIT n [+ OOM] -> Result;
//	       socket and initrd removed
//	Kill:  DIR/killed, QMP quit, SIGKILL after grace -> Result{Signal: 9}
//	Recover: DIR/vm.json -> same pid and start time? re-attach : Result from files
//	Start, warm (the shape has a snapshot): the same, but no job initrd
//	       (-initrd the image's base), -incoming fd:13 (WARM/KEY.state, opened
//	       by the daemon), the file server with the snapshot's root key; once
//	       the stream is in: QMP cont, then the agent's FrameJob (seed, clock,
//	       the payload); vm.json's warm and warm_job_in record it
//
// Output files are written by QEMU as the guest sends the bytes, so a job's
// output is on the node while it runs. The runner opens them as the job's
// user, truncating them (Slurm's default --open-mode, so a requeued job
// starts with empty files), and QEMU inherits them open for appending.
//
// # Whom QEMU runs as
//
// QEMU parses everything a guest sends it, so a bug in a device model
// (a "VM escape") runs code as QEMU's process. It therefore never runs as
// root: each VM's QEMU runs as a uid of its own, taken from a range the
// node reserves for VMs (Config.VMIDs, noded --vm-ids; 0x70000000 and the
// 65535 ids after it by default), with the gid of the same number, no
// supplementary groups but /dev/kvm's when the VM uses KVM and the device
// is open to its group only, no capabilities (a non-root uid keeps none
// across execve) and no_new_privs (set on a throwaway thread that forks
// QEMU, since Go's exec cannot set it in the child), so that no set-user-id
// program or file capability gives it any back. Its working directory is /.
//
// Why an id per VM rather than the job's user: QEMU as the user would let
// an escaped guest act as the user everywhere on the node (their other
// jobs' processes, their files outside the job's shares, ptrace of the
// user's login sessions), and a user's two VMs could reach each other. A
// uid nobody else has owns nothing on the node: an escaped QEMU can
// signal or ptrace no other process (the daemon, the file servers and
// other VMs all run as other uids), read no file that is not readable by
// everyone, and write none. The ids need no /etc/passwd entry. Two VMs
// never share an id: takeID hands out the lowest id that no VM of this
// process holds (heldIDs, across the runners of corral dev) and no process
// of the node runs as, and the id is freed when QEMU is gone. vm.json
// records it, so a restarted daemon re-adopts a VM with its id (Recover
// holds it again) and, until then, skips it because its QEMU runs as it.
//
// What QEMU must reach it gets open, never by path (qemufiles.go): the
// state directory stays the daemon's (0700, root's), and QEMU inherits at
// fixed descriptor numbers the tap device, the image's kernel and the
// job's initrd (read-only, named /proc/self/fd/N, which reopens the open
// file: the kernel must be readable by everyone, the initrd, which holds
// the job's script and environment, is 0400 and the VM id's), the console
// and control files (opened by the daemon for appending, handed over in
// fd sets, so QEMU's id is never checked against them), the job's output
// files (opened as the job's user, as the process runner opens them), the
// QMP and agent sockets (bound by the daemon, 0600: only root connects; it
// connects by path as before) and, for virtiofs, a connection to
// virtiofsd's socket that the daemon opened. A live migration's
// destination gets the same descriptors (the command line is the same),
// and the migration stream goes over TCP (or a descriptor), not a socket
// file QEMU would have to create. The NFS file server (noded/nfsd) and
// virtiofsd are not QEMU and keep their own credentials: the server acts
// as the job's user, virtiofsd runs as root (see docs/vm.md).
//
// The daemon still starts QEMU in a session of its own, reads its console
// and control files, talks QMP, puts it in its cgroup, pins its threads
// and kills it (pidfd, same pid and start time): root may do all of that
// to any uid. A daemon that is not root cannot change uids; its QEMU then
// runs as the daemon's own user, which is not root either. A VM with GPUs
// or SR-IOV functions passed through (vfio.go) gets their IOMMU groups'
// /dev/vfio/N for its life and keeps CAP_IPC_LOCK alone, to pin guest
// RAM (not tried on hardware here: no IOMMU on the test hosts). Where QEMU
// cannot run without root (/dev/kvm open to root only, an image kernel
// others cannot read, the range used up) the VM does not start and the
// error says why and what to change; it never falls back to root (the
// accelerator probe then reports KVM's reason and takes TCG).
//
// # Design decisions
//
// QMP is reached with one connection per command rather than one held per
// VM: QEMU serves one QMP client at a time, and a held connection would
// lock out a re-attaching daemon and operators. Pause stops the vCPUs and
// the guest clock with them; after Continue the guest's wall clock is
// behind the host's by the pause, which a job sees as time not passing.
//
// The accelerator is decided once per daemon, not per VM: the probe boots
// a test guest with KVM (-cpu host) when /dev/kvm opens and takes KVM only
// if the guest reaches CORRAL EXIT 0 within 5 s; otherwise it boots the
// guest under TCG (-cpu max), and the probe fails if that does not work
// either. ProbeReport says what happened. New probes at once; Load does
// not, and the node daemon probes (noded.Prober) after it registered, so
// that a restarted daemon keeps the lease of the VMs it re-adopts however
// slow the test guest is, or restores the probe it recorded on the same
// boot for the same ProbeKey (this program, QEMU, the default image's
// kernel and initramfs, the forced accelerator, whether /dev/kvm opens).
// No VM starts before one of the two.
//
// tsc_early_khz, which TCG boots need (see vmimage), is the host's TSC
// frequency: measured against the monotonic clock on hosts with
// constant_tsc, since /proc/cpuinfo's "cpu MHz" is the current clock on
// bare-metal hosts with frequency scaling, and taken from cpuinfo
// elsewhere. The measurement is one RDTSC instruction in assembly
// (tsc_amd64.s).
//
// A job without --mem gets 512 MiB of guest RAM; less than 96 MiB is
// refused, since the kernel unpacks the initramfs into RAM and panics
// below that.
package vmrun
