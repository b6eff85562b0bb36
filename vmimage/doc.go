// Package vmimage owns corral's guest images and the guest side of the job
// protocol: what the node daemon's vm runner hands a job VM, and what comes
// back.
//
// It owns the image metadata (image.json, written by scripts/build-image.sh,
// `make image`), the per-job payload format and its writer, the kernel command
// line and serial-port layout the guest's init (cmd/corral-init, package guestinit) expects, the
// parser of the control channel, and the guest agent's protocol (agent.go:
// frames, messages and their checks, used by both ends). It never starts, watches or kills QEMU,
// opens sockets or reads clocks: the vm runner in noded does that, from this
// description. Its only I/O is reading image directories (Load, List) and the
// base initramfs (Image.WriteInitrd).
//
// Entry points: Load and List find images; WritePayload (or
// Image.WriteInitrd) builds a job's -initrd; KernelCmdline and the Port
// values build the -append and -device arguments; ParseControl reads what
// the guest reports; AppendFrame, FrameDecoder and the message types speak
// to the guest agent.
//
// # Images
//
// An image is a directory holding image.json, a kernel and a base
// initramfs:
//
//	{"name": "default", "kernel": "vmlinux", "initrd": "initramfs.cpio",
//	 "kernel_version": "6.1.0-57-cloud-amd64", "pvh": true, "protocol": 1, ...}
//
// The default image (build/images/default) is Debian's
// linux-image-cloud-amd64 kernel, uncompressed to an ELF vmlinux that
// -M microvm boots through its PVH entry ("pvh": true; the bzImage vmlinuz
// with "pvh": false when extraction failed), and an uncompressed newc initramfs of
// busybox-static, /init and the kernel modules /init loads ("host_root":
// true): the cloud kernel has 8250 serial, initrd and devtmpfs built in, and
// virtio, virtiofs, NFS and overlayfs only as modules. Each feature's
// modules are listed in load order in /etc/corral/modules/FEATURE (virtio,
// overlay, virtiofs, nfs, net, agent, balloon). With a job/fs in the payload the
// job's root is the host's tree (see docs/vm.md); without, it is the
// initramfs, where /bin/bash runs busybox ash.
//
// # Booting a job VM
//
// The host runs, per job (names in capitals are the host's choice):
//
//	qemu-system-x86_64 -M microvm -accel tcg|kvm -cpu max -m MEM -smp CPUS
//	  -nodefaults -no-user-config -display none -no-reboot
//	  -serial file:CONSOLE                      # ttyS0, iobase 0x3f8, IRQ 4
//	  -chardev file,id=out,path=STDOUT -device isa-serial,chardev=out,iobase=0x2f8,irq=3  # ttyS1
//	  -chardev file,id=err,path=STDERR -device isa-serial,chardev=err,iobase=0x3e8,irq=5  # ttyS2
//	  -chardev file,id=ctl,path=CONTROL -device isa-serial,chardev=ctl,iobase=0x2e8,irq=6 # ttyS3
//	  -device virtio-serial-device                                   # the agent's port (protocol 3)
//	  -chardev socket,id=agent,path=AGENT_SOCK,server=on,wait=off
//	  -device virtserialport,chardev=agent,name=corral.agent
//	  -kernel IMAGE.Kernel -initrd JOB_INITRD -append CMDLINE
//
// StdoutPort, StderrPort and ControlPort give the -device values
// (Port.DeviceArg). Each port has its own IRQ: the legacy defaults share IRQ
// 4 between ttyS0 and ttyS2 and IRQ 3 between ttyS1 and ttyS3. The guest
// learns iobase and IRQ from microvm's ACPI tables, and ttyS numbers follow
// the iobase, not the order of the -device options. Only file chardevs were
// tried: they receive bytes as the guest sends them, so output is streamed,
// not delivered at the end (socket and pipe backends should behave the
// same). When stdout and stderr go to the same file, leave out the ttyS2
// device: init then sends stderr to ttyS1 too. Without ttyS1 the job's
// output, and without ttyS3 the control lines, go to the console.
//
// CMDLINE is KernelCmdline(hostTSCkHz, extra...):
//
//	console=ttyS0 quiet panic=-1 8250.nr_uarts=4 cryptomgr.notests tsc_early_khz=KHZ [extra]
//
// Each parameter has a reason:
//   - tsc_early_khz is the host's TSC frequency in kHz (the tests take the
//     "cpu MHz" of /proc/cpuinfo × 1000, right on hosts with constant_tsc).
//     Under TCG it is required: without it about one boot in eight hangs
//     after "Marking TSC unstable".
//   - panic=-1 with -no-reboot makes a guest panic end QEMU instead of
//     hanging.
//   - 8250.nr_uarts=4 registers ttyS0..ttyS3.
//   - cryptomgr.notests skips the kernel's crypto self-tests (0.1–0.4 s of
//     a TCG boot; the guest uses no kernel crypto).
//   - Under TCG only, TCGCmdline: mitigations=off. TCG executes nothing
//     speculatively, so the guest kernel's Spectre/Meltdown mitigations
//     guard against nothing there; they cost TCG more than a CPU (a
//     retpoline is several translated blocks where an indirect call is
//     one). Measured in alternating boots: 0.3–0.7 s less of QEMU's CPU to
//     a default VM's first output (docs/performance.md, issue #11). Under
//     KVM the guest keeps them.
//   - Optional, read by init: corral.hostname=NAME sets the guest's host
//     name; corral.debug=1 traces init on the console; corral.agent=1
//     says the VM has the agent's port, and init starts the agent.
//
// The command line is capped at 2048 bytes: it carries flags, never the job.
//
// # The job payload
//
// JOB_INITRD is the image's base initramfs, zero bytes up to a 4-byte
// boundary, then the job's payload, one more archive that the kernel unpacks
// over the first: Image.WriteInitrd writes both, WritePayload the payload
// alone. Neither is compressed (a plain archive reaches /init about 0.1 s
// sooner under TCG; a gzip'd base from another image still works). The
// payload is an uncompressed newc cpio archive (magic "070701", 13 header fields of 8
// upper-case hex digits, NUL-terminated names, header+name and data each
// padded to 4 bytes, closed by "TRAILER!!!") holding, owned by root:
//
//	job/          directory, 0755
//	job/script    0755  the job script; without "#!" it is run by /bin/sh
//	job/env       0644  the environment: KEY=VALUE entries, each followed by NUL
//	job/args      0644  the script's arguments, each followed by NUL; may be empty
//	job/workdir   0644  the working directory, one line ("/" when empty)
//	job/user      0644  optional (protocol 2): whom the job runs as, five lines:
//	                    name, uid, gid, groups separated by spaces, home
//	job/fs        0644  optional (protocol 2): the host's tree as the job's root:
//	                    "root virtiofs TAG" (or "root nfs ADDR PORT EXPORT GUESTADDR"),
//	                    then "share PATH" per path mounted read-write at the same path
//	job/net       0644  optional: a multi-node job's private network (Net):
//	                    "card MAC ADDR/BITS MTU", then "host ADDR NAME" per node
//	                    of the job; init sets the card whose MAC is MAC up with
//	                    ADDR and writes /etc/hosts (RenderHosts): the job's
//	                    hosts first, then the host's entries for other names
//
// Values may hold spaces and newlines; nothing may hold NUL (WritePayload
// refuses it). With job/fs, init mounts the host's tree read-only under a
// tmpfs overlay at /newroot, the guest's own /proc, /sys, /dev, /tmp,
// /var/tmp and /run inside it and each shared path read-write, all nosuid
// and nodev, and runs the script chrooted there as /dev/fd/3 (the script
// stays in the initramfs; the interpreter reads it through that
// descriptor); the working directory must then exist on the host. The
// script runs as job/user (root without one) with exactly the entries of job/env
// as its environment (env -i): the host must put PATH, HOME and the job's
// CORRAL_* and SLURM_* variables there; a shell adds PWD and SHLVL as shells
// do. Its arguments are job/args, its working directory job/workdir
// (created when missing), its stdin /dev/null, its stdout ttyS1 and its
// stderr ttyS2 (or ttyS1). All four ports are in raw mode: bytes arrive
// unchanged, without CRLF.
//
// # The control channel
//
// Init writes ASCII lines ending in "\n" to ttyS3, in this order:
//
//	CORRAL READY          a guest booted for a warm start's snapshot is
//	                      prepared and waits for its job (never in a job's)
//	CORRAL STARTED        once, just before the script is started
//	CORRAL ERROR <text>   init could not start the job (no /job/script,
//	                      unusable workdir); EXIT 127 follows
//	CORRAL OOM            the guest's OOM killer killed a process while the
//	                      job ran (oom_kill in /proc/vmstat grew); at most once
//	CORRAL EXIT <code>    last: the script's exit status, 0–255; 128+N when
//	                      signal N killed it; 126/127 when it could not be run
//
// After the script exits, init kills what it left running, waits until the
// UARTs have sent all queued output (so every byte of stdout and stderr
// left the guest before EXIT), syncs, writes the OOM and EXIT lines and
// powers off; QEMU then exits 0. QEMU's exit status says nothing about the
// job: a VM that ends without an EXIT line crashed (kernel panic, init
// failure) or was killed. Read output chardevs to their end after QEMU
// exits to be sure of the last bytes.
//
// # The guest agent
//
// With corral.agent=1 init runs the agent beside the job: it loads
// virtio_console, finds the virtio-serial port named corral.agent under
// /sys/class/virtio-ports (its number varies, and it appears a moment after
// the module loads), opens it once for good (a second open is EBUSY) and
// serves the node's requests on it: commands, signals and files in the
// job. It starts nothing and touches nothing on its own, and the job never
// waits for it. Images of protocol 3 (image.json "protocol": 3) have it.
//
// Frames. Everything on the port is frames of a 20-byte header and a
// payload of at most 4 MiB (MaxFramePayload):
//
//	offset size
//	0      2    magic C4 7A
//	2      1    frame format version, 1 (a change here breaks both ends)
//	3      1    type (FrameType)
//	4      4    request id, big-endian; 0 is the session's own
//	8      4    payload length, big-endian
//	12     4    CRC-32C of the payload
//	16     4    CRC-32C of bytes 0..15
//
// A reader (FrameDecoder) drops bytes that do not start a frame whose
// header and payload check out, one at a time, and so resynchronises after
// a reconnection: QEMU's socket does not replay bytes in flight, so one
// side may see the tail of a frame meant for the previous connection, or
// the head of one that was cut.
//
// Sessions. The node opens a session on each connection with Hello
// {"version": 1, "nonce": N} (id 0), repeated every 300 ms until the guest
// answers with a Hello carrying N back (and its own version): whatever the
// node reads before that answer is an earlier session's. The agent takes a
// Hello, or an end of file on the port (the host disconnected: the node
// daemon restarted, or the VM migrated and the destination's node has not
// connected yet), as the end of the previous session: its requests are
// abandoned, their processes killed and their files closed. Requests do not
// survive a reconnection; the job does. The node numbers requests from a
// random start, never twice on one connection, so that a frame of an
// earlier daemon's request left on the channel matches none of its own.
// A node that sees a Hello of another version refuses the session (rebuild
// the image); a later version adds frame types and message fields, which
// an older agent refuses (unknown fields are refused, unknown frame types
// ignored).
//
// Requests, host to guest. The first frame names the request and carries a
// JSON message (decoded strictly; every field checked, on both sides:
// ExecRequest.Validate and the rest):
//
//	FrameExec       ExecRequest{argv, env, dir, user{name,uid,gid,groups}, tty, rows, cols}
//	FrameSignal     SignalRequest{signal 1-64, scope all|batch|exec, exec}
//	FrameReadFile   FileRequest{path, user}
//	FrameWriteFile  FileRequest{path, user, mode 0-0777}
//
// then, on the same id: FrameData on stream 0 (stdin, or the file's bytes),
// FrameClose of stream 0 (end of stdin, or of the file), FrameWindow grants
// for streams 1 and 2, FrameResize {rows, cols}, FrameCancel (abandon: kill
// the process, close the file). Guest to host: FrameStarted {pid} (an exec
// runs) or {size, mode} (a file opened), FrameData on streams 1 (stdout; a
// terminal's output; a read file's bytes) and 2 (stderr), FrameClose of
// each, and FrameEnd last: {code} or {signal} of an exec, or {errno, error}
// of a request that failed (a Linux errno: 13 is EACCES), or {} for done.
// A request refused before it began gets its End with no Started.
//
// Flow control: each stream's sender may have AgentWindow (256 KiB) of data
// in flight beyond what the receiver granted back with FrameWindow, and
// sends at most 64 KiB per frame. A receiver that gets more than it granted
// cancels the request: neither side's reader ever blocks on one request,
// so a command whose reader stalls does not stall the channel, the job's
// signals or other commands.
//
// What the agent does, as init (root) in the guest:
//   - Exec: the process runs chrooted in the job's root (the host's tree
//     under the overlay, or the initramfs), in a session of its own, with
//     the user's uid, gid and groups (root only when the node sends uid 0:
//     a job that runs as root, or an admin's request), exactly the request's
//     environment, in dir (entered as the user, so a directory the user may
//     not enter fails with EACCES). argv[0] without a slash is looked up in
//     the environment's PATH inside the job's root. With tty the process
//     gets a terminal of the job's devpts and its controlling terminal.
//     Its End follows its exit and the end of its output, or 2 s after the
//     exit when a background process keeps the output open.
//   - Signal: "all" is kill(-1) from PID 1, which reaches every process but
//     init: the batch script, what it started, and exec sessions. "batch"
//     is the batch script's process group; "exec" one exec's group.
//   - Files: opened with the user's file-system credentials (setfsuid on a
//     locked thread) through openat2 with RESOLVE_IN_ROOT, so that the
//     guest kernel checks the user's permissions (EACCES) and a symbolic
//     link cannot lead out of the job's root. Only regular files are read
//     or written (O_NONBLOCK keeps a FIFO from blocking the open); a write
//     creates or truncates, with mode under umask 022, and its End comes
//     after fsync.
//
// Init reaps every child through one reaper (SIGCHLD, wait4 with WNOHANG),
// which hands the job's and each exec's status to whoever started it and
// drops the orphans'.
//
// # Warm starts
//
// A guest booted for a warm start's snapshot has corral.warm=STAGE on its
// kernel command line (WarmNet or WarmRoot) and, as its payload, only
// job/fs: the share its copies will have, without shared paths or a way
// out. Init does, for that share, the steps every job's root needs (the
// modules, the card, at WarmRoot the root mounted with the overlay and the
// guest's own mounts, and bash and python run once as nobody), starts the
// agent, writes "CORRAL READY" to the control port and waits. The node
// saves it there. In each copy restored from it the node sends one
// FrameJob request: a JobStart (SeedBytes of randomness, which init credits
// to the kernel's pool before it reseeds the kernel's generator; the
// node's wall clock, which init sets; the payload's size) and, on stream
// 0, the job's payload exactly as WritePayload writes it, which init
// checks (ParsePayload) and writes under /job. The End of the request says
// the job is in place; init then runs it as in a booted guest, the steps
// already taken not taken twice. Until then the agent serves Hello and
// FrameJob only: other requests wait for the job's root. A guest booted
// with its job refuses FrameJob (EBUSY), and a guest that waited 10
// minutes for one powers off. Images of protocol 4 can do this.
//
// Every job's root also gets an /etc/machine-id of its own, drawn from
// the guest's random generator (after the reseed, in a copy).
//
// # Guest environment
//
// /proc, /sys, /dev (devtmpfs), /dev/pts, /dev/shm and /tmp (tmpfs) are
// mounted and lo is up, so nproc, free and friends report the VM's vCPUs and
// memory (about 220 MiB usable of -m 256; the kernel keeps the rest). There
// is no disk, network or swap; the root filesystem is the initramfs, in RAM.
package vmimage
