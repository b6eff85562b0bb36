//go:build !corral_client

package main

import (
	"context"
	"errors"

	"corral/noded/nfsd"
)

// runNFSD is `corral nfsd CONFIG`: the file server of one job VM's NFS
// share. The node daemon's vm runner starts it with its listener on
// descriptor 3 and its configuration in the VM's state directory; it is
// not meant to be run by hand.
func runNFSD(_ context.Context, _ *cliEnv, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: corral nfsd CONFIG (the node daemon starts this for each job VM)")
	}
	return nfsd.RunProcess(args[0])
}
