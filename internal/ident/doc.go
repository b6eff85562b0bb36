// Package ident resolves a job's user on the node and acts as that user.
//
// It owns two things: Lookup, which turns the user name a job carries into
// the uid, gid, supplementary groups, home and shell of the node's own
// passwd and group databases (os/user: NSS with cgo, /etc/passwd and
// /etc/group without), and User.Do, which runs a function with the user's
// file-system credentials (fsuid, fsgid and groups) on one locked OS thread,
// so that the kernel checks and owns what the function opens or creates as
// it would for the user, while the rest of the process stays root.
//
// It never decides whether a user may run a job (the controllers do) and
// never changes the credentials of the whole process.
//
// # Why per-thread file-system credentials
//
// Linux keeps credentials per thread. setfsuid, setfsgid and the raw
// setgroups system call change only the calling thread's; Go's
// syscall.Setgroups would change every thread of the process. Do locks its
// goroutine to its thread for the duration, sets the three, runs the
// function and restores them. Changing the fsuid from 0 to another id also
// drops the thread's CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER and
// CAP_CHOWN from its effective set (and restores them when it goes back to
// 0), so permission checks are the user's. A thread whose credentials could
// not be restored is never unlocked: Go then ends it with its goroutine
// rather than run other code with a user's credentials.
package ident
