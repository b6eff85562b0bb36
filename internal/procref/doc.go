// Package procref owns the small, Linux-specific mechanism the node
// daemon's runners share for keeping hold of the processes they start:
//
//   - Ref watches one process named by pid, start time and boot id, through
//     a pidfd where the kernel has them (waiting then costs no thread, and a
//     signal cannot reach a process that reused the pid) and by polling
//     /proc where it does not. Open is the entry point.
//   - ReadStat reads the fields of /proc/<pid>/stat that name and describe a
//     process (state, process group, session, start time).
//   - BootID returns the host's boot id: a recorded (pid, start time) pair
//     means something only within the boot that recorded it.
//   - WriteInPlace writes a small state file without truncating it first.
//
// It must never decide anything about jobs or VMs: it knows processes and
// files, not what they run. It never signals a pid it has not checked still
// names the recorded process, and it starts no goroutines.
package procref
