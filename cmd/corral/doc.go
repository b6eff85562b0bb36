// Package main is the single corral binary: the CLI subcommands (submit,
// queue, nodes, cancel, show, ...), the daemons (ctld, noded, and the
// embedded single-process cluster, dev) and the Slurm aliases: invoked as
// sbatch, squeue, sinfo, scancel, scontrol, sprio or sshare (through symlinks made by
// `corral install-aliases DIR`) it behaves as the matching subcommand.
//
// It holds only wiring: option tables, calls to package api's client and
// rendering through package display. Parsing of job requests lives in
// package submit, policy in ctld/sched, execution in noded.
package main
