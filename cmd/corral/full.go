//go:build !corral_client

package main

import (
	"io"

	"corral/accounting"
	"corral/api"
	"corral/ctld"
)

// This file and the daemons' files are what the full binary holds beyond
// the client binary (client.go): code whose packages cost every process
// that links them their start-up (Parquet's encoders, the controller).

// exportWriter returns the writer of an accounting export format; nil
// for a format it does not know.
func exportWriter(_ *cliEnv, format string) (func(io.Writer, []api.AcctRecord) error, error) {
	return map[string]func(io.Writer, []api.AcctRecord) error{
		"csv": accounting.WriteCSV, "ndjson": accounting.WriteNDJSON, "parquet": accounting.WriteParquet,
	}[format], nil
}

// readAuditStore reads the audit chains in a copy of a member's data
// directory, with the problems replaying its log found.
func readAuditStore(_ *cliEnv, dir string) ([]api.AuditRecord, map[string]api.AuditHead, []error, error) {
	s, replay, err := ctld.ReadStore(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	return s.Audit, s.AuditHeads(), replay, nil
}

// handOff is the client binary's (client.go); the full binary holds every
// command.
func handOff(_ *cliEnv, err error) error { return err }
