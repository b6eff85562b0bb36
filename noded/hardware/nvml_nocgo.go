//go:build !cgo

package hardware

import "corral/api"

// GPUs returns the host's GPUs. This binary was built with
// CGO_ENABLED=0, and NVML can only be reached through cgo, so it cannot see
// GPUs: GPUs returns nil, nil, exactly as on a host without the NVIDIA
// library. Build with CGO_ENABLED=1 (and gcc) to discover GPUs. FromNVML
// does not exist in such a build, because go-nvml's nvml package does not
// compile without cgo.
func GPUs() ([]api.GPU, error) {
	return nil, nil
}
