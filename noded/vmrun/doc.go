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
// them, and the guest a default route and the node's nameservers.
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
// Entry point: New, then Runner.Start and Runner.Recover. The handles are
// *VM, which also offer Pause, Continue and Paused for suspend/resume,
// VCPUThreads for pinning, and Exec, Signal, ReadFile and WriteFile.
//
// # A job VM's life
//
//	Start: initrd = image base + payload   -> DIR/job.initrd
//	       truncate the output files (Slurm's default)
//	       qemu-system-x86_64 -M microvm -accel A -cpu max|host -m MEM -smp N
//	         -nodefaults -no-user-config -display none -no-reboot
//	         -chardev file,id=con,path=DIR/console.log,append=on -serial chardev:con
//	         -chardev file,id=out,path=STDOUT,append=on -device isa-serial,chardev=out,... (ttyS1)
//	         -chardev file,id=err,path=STDERR,append=on -device isa-serial,chardev=err,... (ttyS2, only when STDERR != STDOUT)
//	         -chardev file,id=ctl,path=DIR/control,append=on -device isa-serial,chardev=ctl,... (ttyS3)
//	         -qmp unix:DIR/qmp.sock,server=on,wait=off
//	         -device virtio-serial-device -chardev socket,id=agent,path=DIR/agent.sock,server=on,wait=off
//	         -device virtserialport,chardev=agent,name=corral.agent                 (the guest agent)
//	         -global virtio-mmio.force-legacy=false
//	         -netdev tap,id=share,fd=3,vhost=off -device virtio-net-device,...      (NFS: the tap in DIR/netns)
//	         | -chardev socket,path=DIR/virtiofs.sock -device vhost-user-fs-device  (virtiofs)
//	         -kernel IMAGE/vmlinux -initrd DIR/job.initrd
//	         -append "console=ttyS0 ... tsc_early_khz=HOST_KHZ corral.hostname=NODE corral.agent=1"
//	       (setsid; pid + start time + argv + agent socket -> DIR/vm.json; wait for QMP)
//	       NFS: `corral nfsd DIR/nfsd.conf` on the namespace's listener -> DIR/nfsd.json
//	Wait:  QEMU exits -> DIR/control: CORRAL EXIT n [+ OOM] -> Result;
//	       socket and initrd removed
//	Kill:  DIR/killed, QMP quit, SIGKILL after grace -> Result{Signal: 9}
//	Recover: DIR/vm.json -> same pid and start time? re-attach : Result from files
//
// Output files are written by QEMU as the guest sends the bytes, so a job's
// output is on the node while it runs. QEMU opens them with append=on after
// the runner truncated them itself: the truncation is Slurm's default
// --open-mode, and a requeued job therefore starts with empty files.
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
// guest under TCG (-cpu max), and New fails if that does not work either.
// ProbeReport says what happened.
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
