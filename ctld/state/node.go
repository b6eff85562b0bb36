package state

import (
	"slices"
	"time"

	"corral/api"
)

// Node is a node as the state records it: what its daemon registered, the
// operator's and liveness's flags, and the allocations it holds.
type Node struct {
	Name       string         `json:"name"`
	CPUs       int            `json:"cpus"`
	MemMB      int64          `json:"mem_mb"`
	Partitions []string       `json:"partitions,omitempty"`
	Runner     string         `json:"runner"`
	BootID     string         `json:"boot_id"`
	Version    string         `json:"version,omitempty"`
	Images     []string       `json:"images,omitempty"`
	Inventory  *api.Inventory `json:"inventory,omitempty"`
	Accel      string         `json:"accel,omitempty"`
	// OverheadMB is the runner's own memory per run (QEMU's per VM).
	OverheadMB int64 `json:"overhead_mb,omitempty"`
	// APIAddr is the daemon's job API (http://HOST:PORT), which the
	// controllers proxy exec, signals, files and output to; empty when it
	// serves none.
	APIAddr string `json:"api_addr,omitempty"`
	// Probing says the node's runner is still testing the host (see
	// api.NodeInfo.Probing): no new job is placed on it.
	Probing bool `json:"probing,omitempty"`
	// Key is the fingerprint of the key the node's daemon registers with
	// (RegisterNode.Key).
	Key string `json:"key,omitempty"`
	// Features are what the node's daemon reports (its --features);
	// OpFeatures, when OpFeaturesBy names who set them, replace them
	// (SetNodeFeatures) and outlive the daemon's registrations.
	Features     []string `json:"features,omitempty"`
	OpFeatures   []string `json:"op_features,omitempty"`
	OpFeaturesBy string   `json:"op_features_by,omitempty"`
	// Migrate says the daemon can be either side of a live migration
	// (api.NodeInfo.Migrate); CheckpointDir is its shared checkpoint
	// directory (api.NodeInfo.CheckpointDir).
	Migrate       bool   `json:"migrate,omitempty"`
	CheckpointDir string `json:"checkpoint_dir,omitempty"`
	// TmpMB is the node's local scratch space (api.NodeInfo.TmpMB);
	// AllocTmpMB sums what its active allocations hold of it.
	TmpMB      int64 `json:"tmp_mb,omitempty"`
	AllocTmpMB int64 `json:"alloc_tmp_mb,omitempty"`
	// Overlay is where the node's end of its multi-node runs' networks
	// listens (api.NodeInfo.Overlay); empty when it offers none.
	Overlay string `json:"overlay,omitempty"`

	// Down is set by liveness when heartbeats stop; Drain by an operator.
	Down   bool   `json:"down,omitempty"`
	Drain  bool   `json:"drain,omitempty"`
	Reason string `json:"reason,omitempty"`
	// DrainMigrate says the drain moves the node's jobs to other nodes by
	// live migration (corral node drain --migrate); DrainNote says which
	// of them stay and why, as the last pass found.
	DrainMigrate bool   `json:"drain_migrate,omitempty"`
	DrainNote    string `json:"drain_note,omitempty"`
	// ReasonUser and ReasonTime are who set Reason and when: the principal
	// of the drain, or "root" for what the controllers decided themselves
	// (a node that stopped responding, one that failed attestation), as
	// Slurm names its own SlurmUser.
	ReasonUser string    `json:"reason_user,omitempty"`
	ReasonTime time.Time `json:"reason_time,omitempty"`
	Registered time.Time `json:"registered"`
	LastSeen   time.Time `json:"last_seen"`
	// AllocCPUs and AllocMemMB sum what the active allocations hold.
	AllocCPUs  int   `json:"alloc_cpus"`
	AllocMemMB int64 `json:"alloc_mem_mb"`
	// AllocIndex is the Raft index at which the node's allocations last
	// changed; its daemon's watch waits on it.
	AllocIndex uint64 `json:"alloc_index"`
	// Allocs are the active allocations on the node, in the order they
	// were made.
	Allocs []uint64 `json:"allocs,omitempty"`
	// Checkpoints are the jobs whose checkpoint files the node keeps
	// (checkpoints.go).
	Checkpoints []uint64 `json:"checkpoints,omitempty"`
}

// ActiveFeatures returns the features jobs' constraints are matched
// against: the operator's when one set them, else the daemon's.
func (n *Node) ActiveFeatures() []string {
	if n.OpFeaturesBy != "" {
		return n.OpFeatures
	}
	return n.Features
}

// HasFeature reports whether f is one of the node's active features.
func (n *Node) HasFeature(f string) bool { return slices.Contains(n.ActiveFeatures(), f) }

// controllerUser is who the controllers' own reasons are set by, as sinfo
// -R shows them.
const controllerUser = "root"

// setReason records why the node is down or drained, who said so and when;
// an empty reason clears all three.
func (n *Node) setReason(reason, by string, at time.Time) {
	n.Reason, n.ReasonUser, n.ReasonTime = reason, by, at
	if reason == "" {
		n.ReasonUser, n.ReasonTime = "", time.Time{}
	}
}

// nodeFromInfo makes the record of a node from what its daemon registered.
func nodeFromInfo(info *api.NodeInfo) *Node {
	return &Node{
		Name: info.Name, CPUs: info.CPUs, MemMB: info.MemMB, Partitions: info.Partitions, Runner: info.Runner,
		BootID: info.BootID, Version: info.Version, Images: info.Images, Inventory: info.Inventory,
		Accel: info.Accel, OverheadMB: info.OverheadMB, APIAddr: info.APIAddr, Probing: info.Probing,
		Migrate: info.Migrate, CheckpointDir: info.CheckpointDir, TmpMB: info.TmpMB, Overlay: info.Overlay,
		Features: sortedFeatures(info.Features),
	}
}

// State derives the sinfo state from the node's flags and load.
func (n *Node) State() api.NodeState {
	switch {
	case n.Down:
		return api.NodeDown
	case n.Drain && n.AllocCPUs > 0:
		return api.NodeDraining
	case n.Drain:
		return api.NodeDrained
	case n.Probing:
		return api.NodeUnknown
	case n.AllocCPUs == 0:
		return api.NodeIdle
	case n.AllocCPUs >= n.CPUs:
		return api.NodeAllocated
	default:
		return api.NodeMixed
	}
}

// FreeCPUs returns the CPUs no active allocation holds.
func (n *Node) FreeCPUs() int { return n.CPUs - n.AllocCPUs }

// FreeMemMB returns the memory no active allocation holds.
func (n *Node) FreeMemMB() int64 { return n.MemMB - n.AllocMemMB }

// sortedFeatures returns features sorted, without repeats, in a list of
// its own (nil for none), so every replica records them alike.
func sortedFeatures(features []string) []string {
	if len(features) == 0 {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(features)))
}
