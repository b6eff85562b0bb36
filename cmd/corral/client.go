//go:build corral_client

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"corral/api"
)

// This file is built instead of the daemons' (go build -tags
// corral_client): the client binary, corral-client, which the Slurm
// aliases point at. It holds every user command, from the same files as
// the full binary, and none of the packages that only the daemons need
// (the controller, the node daemon, hardware discovery, cgo, Prometheus,
// Parquet), whose initialisation every process that links them pays
// before main runs. The few commands that need them are handed to the
// full binary, installed next to this one, with the same command line.

func runCtld(context.Context, *cliEnv, []string) error  { return errFullBinary }
func runNoded(context.Context, *cliEnv, []string) error { return errFullBinary }
func runDev(context.Context, *cliEnv, []string) error   { return errFullBinary }
func runAuthd(context.Context, *cliEnv, []string) error { return errFullBinary }
func runNFSD(context.Context, *cliEnv, []string) error  { return errFullBinary }
func runSim(context.Context, *cliEnv, []string) error   { return errFullBinary }

// errFullBinary marks a command the client binary hands to the full one;
// exitCode does the handing over.
var errFullBinary = errors.New("needs the full corral binary")

// exportWriter hands an accounting export to the full binary: the Parquet
// encoder would double this binary's start-up cost.
func exportWriter(*cliEnv, string) (func(io.Writer, []api.AcctRecord) error, error) {
	return nil, errFullBinary
}

// readAuditStore hands audit verify --data to the full binary, which
// holds the controller's store.
func readAuditStore(*cliEnv, string) ([]api.AuditRecord, map[string]api.AuditHead, []error, error) {
	return nil, nil, nil, errFullBinary
}

// fullBinaryName is the full binary's file name, in this binary's
// directory.
const fullBinaryName = "corral"

// runFull replaces this process with the full binary, run with the same
// command line (argv[0] included, so that an alias stays the alias) and
// environment. It returns only when it cannot.
func runFull(env *cliEnv) error {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return fmt.Errorf("this command needs the full corral binary, and this binary cannot tell where it is: %w", err)
	}
	full := filepath.Join(filepath.Dir(self), fullBinaryName)
	fi, err := os.Stat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("this command needs the full corral binary, which is not installed next to this one (%s): install it there", full)
	case err != nil:
		return fmt.Errorf("this command needs the full corral binary: %w", err)
	}
	if me, err := os.Stat(self); err == nil && os.SameFile(fi, me) {
		return fmt.Errorf("this command needs the full corral binary, but %s is this client binary: install the full one there", full)
	}
	if err := execFull(env, full); err != nil {
		var st exitStatus
		if errors.As(err, &st) {
			return err
		}
		return fmt.Errorf("running %s: %w", full, err)
	}
	return nil
}

// execFull replaces this process with the full binary at path, with
// env's command line and this process's environment. The client binary's
// own tests run it as a child instead (client_test.go).
var execFull = func(env *cliEnv, path string) error {
	return syscall.Exec(path, env.argv, os.Environ())
}

// handOff runs a command the client binary does not hold in the full one.
func handOff(env *cliEnv, err error) error {
	if errors.Is(err, errFullBinary) {
		return runFull(env)
	}
	return err
}
