package gpu

import (
	"slices"
	"testing"

	"corral/api"
)

func TestFree(t *testing.T) {
	inv := &api.Inventory{
		GPUs: []api.GPU{
			{UUID: "GPU-0", Model: "NVIDIA H100 80GB HBM3", NUMANode: 1},
			{UUID: "GPU-1", Model: "NVIDIA A100-SXM4-40GB", NUMANode: 3},
			{UUID: "GPU-2", Model: "NVIDIA A100-SXM4-40GB", NUMANode: 2, MIGEnabled: true,
				MIG: []api.MIGInstance{{UUID: "MIG-a", Profile: "1g.10gb"}, {UUID: "MIG-b", Profile: "2g.20gb"}}},
		},
		PFs: []api.PF{{Addr: "pf", NUMANode: 0, VFs: []api.VF{{Addr: "vf0", NUMANode: -1}, {Addr: "vf1", NUMANode: 0}}}},
	}
	held := func(id string) bool { return id == "vf1" }
	ids := func(ds []Device) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	gpus, migs, vfs := Free(inv, held, "a100", "1g.10gb")
	if !slices.Equal(ids(gpus), []string{"GPU-1"}) {
		t.Errorf("a100 GPUs %v, want [GPU-1] (GPU-2 is in MIG mode)", ids(gpus))
	}
	if !slices.Equal(ids(migs), []string{"MIG-a"}) {
		t.Errorf("1g.10gb slices %v, want [MIG-a]", ids(migs))
	}
	if len(vfs) != 1 || vfs[0] != (Device{"vf0", 0}) {
		t.Errorf("VFs %v, want vf0 on its PF's node 0 (vf1 is held)", vfs)
	}
	if gpus, _, _ := Free(inv, held, "", ""); len(gpus) != 2 {
		t.Errorf("any type: %v, want the two GPUs not in MIG mode", ids(gpus))
	}
	if !IsMIGProfile("3g.40gb") || IsMIGProfile("h100") {
		t.Error("IsMIGProfile mistakes a profile or a model")
	}
}
