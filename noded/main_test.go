package noded_test

import (
	"fmt"
	"os"
	"testing"

	"corral/noded/nfsd"
)

// nfsdChild is the first argument with which this test binary runs as a
// VM's file server (the vm runner's default share is NFS), as `corral
// nfsd` does in production.
const nfsdChild = "corral-test-nfsd"

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == nfsdChild {
		if err := nfsd.RunProcess(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
