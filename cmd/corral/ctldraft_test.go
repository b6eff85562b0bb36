//go:build !corral_client

package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestCtldFlagsRefused: bad Raft tuning, a DSN that does not parse, and
// --join with --peers stop the controller at its start, naming the flag.
func TestCtldFlagsRefused(t *testing.T) {
	base := []string{"corral", "ctld", "--id", "c1", "--data", filepath.Join(t.TempDir(), "c1"), "--raft", freeAddr(t), "--http", freeAddr(t)}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"no trailing log":           {[]string{"--raft-trailing-logs", "0"}, "--raft-trailing-logs=0"},
		"entries not a count":       {[]string{"--raft-snapshot-entries", "many"}, "--raft-snapshot-entries=many"},
		"a bad interval":            {[]string{"--raft-snapshot-interval", "soon"}, "raft-snapshot-interval"},
		"a DSN that does not parse": {[]string{"--accounting-postgres", "postgres://h:notaport/db"}, "--accounting-postgres"},
		"--join and --peers":        {[]string{"--join", "http://127.0.0.1:1", "--peers", "c1=127.0.0.1:2"}, "--join"},
	} {
		r := runCLI(t, context.Background(), "", append(append([]string{}, base...), c.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want a refusal naming %s", name, r.code, r.stderr, c.want)
		}
	}
}
