// Package main is the single corral binary: the CLI subcommands (submit,
// queue, nodes, cancel, show, ...), the daemons (ctld, noded, and the
// embedded single-process cluster, dev) and the Slurm aliases: invoked as
// sbatch, squeue, sinfo, scancel, scontrol, sprio or sshare (through symlinks made by
// `corral install-aliases DIR`) it behaves as the matching subcommand.
//
// Built with -tags corral_client it is the client binary, corral-client:
// the same files less the daemons' (//go:build !corral_client: daemons.go,
// ctldraft.go, overlay.go, sim.go, nfsd.go, authd.go, attest.go,
// devsecure.go, full.go), so none of the controller's, node daemon's,
// Prometheus or Parquet packages and their initialisation are linked (the
// usage plot's renderer is the one package under accounting/ it holds);
// client.go hands the commands it lacks to the full binary beside it. The
// aliases point at it (install-aliases).
//
// It holds only wiring: option tables, calls to package api's client and
// rendering through package display. Parsing of job requests lives in
// package submit, policy in ctld/sched, execution in noded.
package main
