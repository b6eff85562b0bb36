package gpu

import (
	"regexp"
	"strings"

	"corral/api"
)

// Device is a free GPU, MIG slice or VF: its id (UUID or PCI address) and
// its NUMA node (-1 when unknown).
type Device struct {
	ID   string
	NUMA int
}

// migProfile matches MIG profile names such as 1g.10gb or 3g.40gb.
var migProfile = regexp.MustCompile(`^[0-9]+g\.[0-9]+gb$`)

// IsMIGProfile reports whether a --gres type names MIG slices (1g.10gb)
// rather than a GPU model.
func IsMIGProfile(s string) bool { return migProfile.MatchString(s) }

// Free lists the node's free whole GPUs whose model contains gpuType
// (case-insensitively; "" is any), its free MIG slices of migProfile (none
// when ""), and its free VFs (a VF of unknown NUMA node takes its PF's). A
// GPU in MIG mode is only handed out by slices.
func Free(inv *api.Inventory, held func(id string) bool, gpuType, migProfile string) (gpus, migs, vfs []Device) {
	for _, g := range inv.GPUs {
		if g.MIGEnabled {
			if migProfile != "" {
				for _, m := range g.MIG {
					if m.Profile == migProfile && !held(m.UUID) {
						migs = append(migs, Device{m.UUID, g.NUMANode})
					}
				}
			}
			continue
		}
		if held(g.UUID) {
			continue
		}
		if gpuType == "" || strings.Contains(strings.ToLower(g.Model), strings.ToLower(gpuType)) {
			gpus = append(gpus, Device{g.UUID, g.NUMANode})
		}
	}
	for _, pf := range inv.PFs {
		for _, vf := range pf.VFs {
			if held(vf.Addr) {
				continue
			}
			numa := vf.NUMANode
			if numa < 0 {
				numa = pf.NUMANode
			}
			vfs = append(vfs, Device{vf.Addr, numa})
		}
	}
	return gpus, migs, vfs
}
