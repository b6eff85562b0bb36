//go:build cgo

package hardware

import (
	"fmt"
	"math"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"corral/api"
)

// migEnabled reports whether dev's current MIG mode is on. A GPU that
// cannot do MIG answers ERROR_NOT_SUPPORTED, which means off.
func migEnabled(dev nvml.Device) (bool, error) {
	current, _, ret := dev.GetMigMode()
	switch ret {
	case nvml.SUCCESS:
		return current == nvml.DEVICE_MIG_ENABLE, nil
	case nvml.ERROR_NOT_SUPPORTED:
		return false, nil
	}
	return false, fmt.Errorf("mig mode: %w", ret)
}

// readMIG lists the MIG devices (one per compute instance) of a GPU in MIG
// mode, in NVML's MIG index order. parentMemBytes is the GPU's total memory,
// 0 when the driver would not say.
func readMIG(parent nvml.Device, parentMemBytes uint64) ([]api.MIGInstance, error) {
	max, ret := parent.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("max mig device count: %w", ret)
	}
	var out []api.MIGInstance
	for i := 0; i < max; i++ {
		mig, ret := parent.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND {
			continue // an empty slot: fewer instances than the maximum
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("mig device %d: %w", i, ret)
		}
		inst, err := readMIGInstance(parent, mig, parentMemBytes)
		if err != nil {
			return nil, fmt.Errorf("mig device %d: %w", i, err)
		}
		out = append(out, inst)
	}
	return out, nil
}

func readMIGInstance(parent, mig nvml.Device, parentMemBytes uint64) (api.MIGInstance, error) {
	var inst api.MIGInstance
	var ret nvml.Return
	if inst.UUID, ret = mig.GetUUID(); ret != nvml.SUCCESS {
		return inst, fmt.Errorf("uuid: %w", ret)
	}
	mem, ret := mig.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return inst, fmt.Errorf("memory info: %w", ret)
	}
	inst.MemMB = int64(mem.Total >> 20)
	profile, err := migProfile(parent, mig, parentMemBytes)
	if err != nil {
		return inst, err
	}
	inst.Profile = profile
	return inst, nil
}

// migProfile names a MIG device's profile ("1g.10gb", "1c.2g.20gb",
// "1g.10gb+me"). It derives the name from the GPU and compute instance
// profiles, as NVIDIA's go-nvlib does. Looking instances up by id needs a
// privileged caller; without privileges (or without the parent's memory
// size) it falls back to the MIG device's name, which NVML ends with
// "MIG <profile>".
func migProfile(parent, mig nvml.Device, parentMemBytes uint64) (string, error) {
	if parentMemBytes > 0 {
		profile, ret := profileFromInstances(parent, mig, parentMemBytes)
		if ret == nvml.SUCCESS {
			return profile, nil
		}
		if ret != nvml.ERROR_NO_PERMISSION {
			return "", fmt.Errorf("mig profile: %w", ret)
		}
	}
	name, ret := mig.GetName()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("mig name: %w", ret)
	}
	i := strings.LastIndex(name, "MIG ")
	if i < 0 {
		return "", fmt.Errorf("mig profile: name %q does not end in \"MIG <profile>\" and the instance profiles are not readable (run as root)", name)
	}
	return strings.TrimSpace(name[i+len("MIG "):]), nil
}

// profileFromInstances follows a MIG device to its GPU instance and compute
// instance and formats their profiles.
func profileFromInstances(parent, mig nvml.Device, parentMemBytes uint64) (string, nvml.Return) {
	giID, ret := mig.GetGpuInstanceId()
	if ret != nvml.SUCCESS {
		return "", ret
	}
	gi, ret := parent.GetGpuInstanceById(giID)
	if ret != nvml.SUCCESS {
		return "", ret
	}
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return "", ret
	}
	giIndex, giProfile, ret := findGIProfile(parent, giInfo.ProfileId)
	if ret != nvml.SUCCESS {
		return "", ret
	}
	ciID, ret := mig.GetComputeInstanceId()
	if ret != nvml.SUCCESS {
		return "", ret
	}
	ci, ret := gi.GetComputeInstanceById(ciID)
	if ret != nvml.SUCCESS {
		return "", ret
	}
	ciInfo, ret := ci.GetInfo()
	if ret != nvml.SUCCESS {
		return "", ret
	}
	ciSlices, ret := findCISlices(gi, ciInfo.ProfileId)
	if ret != nvml.SUCCESS {
		return "", ret
	}
	return formatProfile(giIndex, giProfile, ciSlices, parentMemBytes), nvml.SUCCESS
}

// findGIProfile finds the GPU instance profile whose Id is id. NVML's
// GpuInstanceInfo carries the profile's Id, which differs from the
// GPU_INSTANCE_PROFILE_* index GetGpuInstanceProfileInfo takes (1g.10gb is
// index 0 but Id 19 on an H100), so every index is tried.
func findGIProfile(parent nvml.Device, id uint32) (int, nvml.GpuInstanceProfileInfo, nvml.Return) {
	for i := 0; i < nvml.GPU_INSTANCE_PROFILE_COUNT; i++ {
		info, ret := parent.GetGpuInstanceProfileInfo(i)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return 0, info, ret
		}
		if info.Id == id {
			return i, info, nvml.SUCCESS
		}
	}
	return 0, nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_FOUND
}

// findCISlices returns the slice count of gi's compute instance profile
// whose Id is id.
func findCISlices(gi nvml.GpuInstance, id uint32) (uint32, nvml.Return) {
	for i := 0; i < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; i++ {
		info, ret := gi.GetComputeInstanceProfileInfo(i, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return 0, ret
		}
		if info.Id == id {
			return info.SliceCount, nvml.SUCCESS
		}
	}
	return 0, nvml.ERROR_NOT_FOUND
}

// profileSuffix holds the attribute suffix of the GPU instance profiles
// whose name carries one, spelled as nvidia-smi and go-nvlib spell them.
var profileSuffix = map[int]string{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1:   "+me",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:   "+me",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME: "+me.all",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME: "+me.all",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME:  "-me",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:  "-me",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:    "+gfx",
}

// formatProfile writes "<g>g.<gb>gb", prefixed with "<c>c." when the
// compute instance uses fewer slices than its GPU instance, and followed by
// the profile's attribute suffix.
func formatProfile(giIndex int, gi nvml.GpuInstanceProfileInfo, ciSlices uint32, parentMemBytes uint64) string {
	name := fmt.Sprintf("%dg.%dgb", gi.SliceCount, migMemoryGB(gi.MemorySizeMB, parentMemBytes))
	if ciSlices < gi.SliceCount {
		name = fmt.Sprintf("%dc.%s", ciSlices, name)
	}
	return name + profileSuffix[giIndex]
}

// migMemoryGB is the "gb" figure of a profile name. It is not the profile's
// memory rounded: NVIDIA names a profile by its share of the GPU, rounded
// up to eighths, times the GPU's memory in whole GiB (an H100's 9856 MiB
// slice of 81559 MiB is "10gb", an H200's 16384 of 143771 MiB "18gb"). This
// is go-nvlib's getMigMemorySizeGB.
func migMemoryGB(profileMB, parentMemBytes uint64) uint64 {
	const eighths = 8
	const gib = 1 << 30
	share := float64(profileMB<<20) / float64(parentMemBytes)
	share = math.Ceil(share*eighths) / eighths
	parentGB := float64((parentMemBytes + gib - 1) / gib)
	return uint64(math.Round(share * parentGB))
}
