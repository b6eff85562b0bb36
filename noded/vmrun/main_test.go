package vmrun

import (
	"os"
	"testing"

	"corral/noded/nfsd"
)

// nfsdChild is the first argument with which this test binary runs as a
// VM's file server, as `corral nfsd` does in production.
const nfsdChild = "corral-test-nfsd"

func TestMain(m *testing.M) {
	nfsd.ServeIfChild(nfsdChild)
	os.Exit(m.Run())
}
