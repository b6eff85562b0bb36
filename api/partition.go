package api

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// DefaultPartition is the partition a node joins and a job goes to when
// neither names one.
const DefaultPartition = "batch"

// PartitionState is a partition's state (Slurm's State=).
type PartitionState string

// Partition states. Append only: they are stored in Raft logs.
const (
	// PartitionUp takes new jobs and schedules them.
	PartitionUp PartitionState = "UP"
	// PartitionDown takes new jobs but starts none (they wait with
	// reason PartitionDown).
	PartitionDown PartitionState = "DOWN"
	// PartitionDrain takes no new jobs and schedules those it has.
	PartitionDrain PartitionState = "DRAIN"
	// PartitionInactive takes no new jobs and starts none.
	PartitionInactive PartitionState = "INACTIVE"
)

// ParsePartitionState reads UP, DOWN, DRAIN or INACTIVE in any case.
func ParsePartitionState(s string) (PartitionState, error) {
	for _, st := range []PartitionState{PartitionUp, PartitionDown, PartitionDrain, PartitionInactive} {
		if strings.EqualFold(s, string(st)) {
			return st, nil
		}
	}
	return "", fmt.Errorf("partition state %q: use UP, DOWN, DRAIN or INACTIVE", s)
}

// Partition is a named set of nodes with limits, as sinfo and scontrol
// show partition show it. Partitions are replicated state, changed with
// `corral partition` or `scontrol update PartitionName=...`; a node daemon
// may also name partitions it serves, which then exist with the defaults.
type Partition struct {
	Name    string `json:"name"`
	Default bool   `json:"default"`
	// State is UP when empty.
	State PartitionState `json:"state,omitempty"`
	// MaxTime is the longest time limit a job may ask for, in seconds; 0 is
	// unlimited.
	MaxTime int64 `json:"max_time_s"`
	// DefaultTime applies to jobs that ask for no time limit; 0 is
	// unlimited.
	DefaultTime int64 `json:"default_time_s"`
	// Nodes are the partition's nodes: those configured for it here and
	// those whose daemons serve it.
	Nodes []string `json:"nodes"`
	// QueueUnfit keeps a job that no node of the partition could ever hold
	// (more CPUs, memory, GPUs, hugepages or VFs than any of its nodes
	// offers) pending, waiting for Resources until a larger node joins.
	// Unset, such a job is refused at submit, as Slurm refuses it:
	// "Requested node configuration is not available".
	QueueUnfit bool `json:"queue_unfit,omitempty"`
	// AllowAccounts, when set, are the only accounts whose jobs the
	// partition takes; DenyAccounts those whose jobs it refuses.
	// AllowQos, when set, are the only QoS it takes.
	AllowAccounts []string `json:"allow_accounts,omitempty"`
	DenyAccounts  []string `json:"deny_accounts,omitempty"`
	AllowQos      []string `json:"allow_qos,omitempty"`
	// PriorityTier orders partitions that share nodes: jobs of a higher
	// tier are considered first, and the partition factor of a job's
	// priority is its partition's tier over the highest tier.
	PriorityTier int `json:"priority_tier,omitempty"`
	// PreemptMode is how the partition's jobs are preempted when their
	// QoS names no mode.
	PreemptMode PreemptMode `json:"preempt_mode,omitempty"`
	// MaxNodes and MinNodes bound the nodes a job of the partition may
	// ask for (0: no bound); a job outside them waits with reason
	// PartitionNodeLimit.
	MaxNodes int `json:"max_nodes,omitempty"`
	MinNodes int `json:"min_nodes,omitempty"`

	// What a job's VM sees (docs/vm.md); CheckVM says which values are
	// valid.

	// SharedPaths are host directories (/home, /scratch, /projects) that
	// every job of the partition has read-write at the same path in its
	// VM, besides its working and submit directories and its home.
	SharedPaths []string `json:"shared_paths,omitempty"`
	// Share is how the host's files reach the VMs: "nfs" (served by the
	// node over the VM's own network; the VM can live-migrate) or
	// "virtiofs" (faster; QEMU 7.2 cannot migrate such a VM). Empty means
	// the node's default, nfs.
	Share string `json:"share,omitempty"`
	// Network is the jobs' outbound network: "none" (the default: the
	// guest's only card reaches its own file server and nothing else) or
	// "node" (the site's network through the node, never the node itself
	// or the controllers; it needs the nfs share, whose card it uses).
	Network string `json:"network,omitempty"`
	// Root is the host directory the partition's jobs get as their root
	// (read-only, under the guest's overlay) instead of the node's own /:
	// a site's own tree or an unpacked container image. Their shared
	// paths are still the node's, at the same paths. It needs the nfs
	// share. Empty is the node's root.
	Root string `json:"root,omitempty"`
	// Warm says whether the partition's jobs' VMs may start warm,
	// restored from a snapshot of a guest the node booted earlier: "yes"
	// (the default, also when empty) or "no" (every VM boots).
	Warm string `json:"warm,omitempty"`
}

// The values of Partition.Network.
const (
	NetworkNone = "none"
	NetworkNode = "node"
)

// The values of Partition.Warm.
const (
	WarmYes = "yes"
	WarmNo  = "no"
)

// WarmFor reports whether a job's VM may start warm in the partition: not
// when the job asked --no-warm (noWarm), nor when the partition says Warm
// no.
func (p Partition) WarmFor(noWarm bool) bool {
	return !noWarm && p.Warm != WarmNo
}

// The values of Partition.Share.
const (
	ShareNFS      = "nfs"
	ShareVirtiofs = "virtiofs"
)

// ShareFor returns the share a job's VM gets in the partition: virtiofs
// when the job gave up migration (noMigrate, --no-migrate) or the
// partition shares over virtiofs, else nfs, the migratable default. The
// node builds the VM with it; the controllers say from it whether the VM
// could migrate.
func (p Partition) ShareFor(noMigrate bool) string {
	if noMigrate || p.Share == ShareVirtiofs {
		return ShareVirtiofs
	}
	return ShareNFS
}

// Up reports whether the partition starts jobs (UP or DRAIN).
func (p *Partition) Up() bool {
	return p.State == "" || p.State == PartitionUp || p.State == PartitionDrain
}

// TakesJobs reports whether the partition takes new submissions (UP or
// DOWN).
func (p *Partition) TakesJobs() bool {
	return p.State == "" || p.State == PartitionUp || p.State == PartitionDown
}

// PartitionKeys lists the settings Set takes, as scontrol spells them.
var PartitionKeys = []string{"AllowAccounts", "AllowQos", "Default", "DefaultTime", "DenyAccounts", "MaxNodes",
	"MaxTime", "MinNodes", "Network", "Nodes", "PreemptMode", "PriorityTier", "QueueUnfit", "Root", "Share", "SharedPaths", "State", "Warm"}

// Set changes one setting by scontrol's name (case-insensitive), e.g.
// Set("State", "DRAIN") or Set("MaxTime", "2:00:00"); parseTime reads
// Slurm's time syntax (package submit's, so that both sides read the
// same). A list ("AllowAccounts=a,b") replaces the old one; an empty value
// or ALL clears it.
func (p *Partition) Set(key, value string, parseTime func(string) (int64, error)) error {
	list := func() []string {
		if value == "" || strings.EqualFold(value, "ALL") {
			return nil
		}
		return strings.Split(value, ",")
	}
	num := func() (int, error) {
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 || n > 1<<20 {
			return 0, fmt.Errorf("%s=%s: give a whole number from 0 to %d", key, value, 1<<20)
		}
		return n, nil
	}
	var err error
	switch strings.ToLower(key) {
	case "allowaccounts":
		p.AllowAccounts = list()
	case "denyaccounts":
		p.DenyAccounts = list()
	case "allowqos":
		p.AllowQos = list()
	case "nodes":
		p.Nodes = list()
	case "sharedpaths":
		p.SharedPaths = list()
	case "share":
		p.Share = strings.ToLower(value)
	case "network":
		p.Network = strings.ToLower(value)
	case "root":
		p.Root = value
	case "warm":
		p.Warm = strings.ToLower(value)
	case "default", "queueunfit":
		var b bool
		switch strings.ToUpper(value) {
		case "YES":
			b = true
		case "NO":
		default:
			return fmt.Errorf("%s=%s: use YES or NO", key, value)
		}
		if strings.EqualFold(key, "default") {
			p.Default = b
		} else {
			p.QueueUnfit = b
		}
	case "state":
		p.State, err = ParsePartitionState(value)
	case "maxtime", "defaulttime":
		var secs int64
		if strings.EqualFold(value, "UNLIMITED") || strings.EqualFold(value, "INFINITE") {
			secs = 0
		} else if secs, err = parseTime(value); err != nil {
			return fmt.Errorf("%s=%s: %w", key, value, err)
		}
		if strings.EqualFold(key, "maxtime") {
			p.MaxTime = secs
		} else {
			p.DefaultTime = secs
		}
	case "prioritytier":
		p.PriorityTier, err = num()
	case "maxnodes":
		p.MaxNodes, err = num()
	case "minnodes":
		p.MinNodes, err = num()
	case "preemptmode":
		if strings.EqualFold(value, "OFF") || value == "" {
			p.PreemptMode = ""
		} else {
			p.PreemptMode, err = ParsePreemptMode(value)
		}
	default:
		return fmt.Errorf("unknown partition setting %q (settings: %s)", key, strings.Join(PartitionKeys, ", "))
	}
	if err == nil {
		err = p.CheckVM()
	}
	return err
}

// CheckVM says what is wrong with the settings of what the partition's job
// VMs see (SharedPaths, Share, Network, Root, Warm), or nil.
func (p *Partition) CheckVM() error {
	for _, sp := range p.SharedPaths {
		if !path.IsAbs(sp) || path.Clean(sp) != sp || sp == "/" {
			return fmt.Errorf("shared path %q: give a clean absolute path other than /", sp)
		}
	}
	switch p.Share {
	case "", "nfs", "virtiofs":
	default:
		return fmt.Errorf("share %q: use nfs (migratable, the default) or virtiofs (faster; the VMs cannot migrate)", p.Share)
	}
	if p.Root != "" && (!path.IsAbs(p.Root) || path.Clean(p.Root) != p.Root) {
		return fmt.Errorf("root %q: give a clean absolute path (a directory on every node of the partition)", p.Root)
	}
	if p.Root != "" && p.Share == ShareVirtiofs {
		return fmt.Errorf("a root of its own (%s) needs the nfs share: drop share virtiofs", p.Root)
	}
	switch p.Network {
	case "", NetworkNone, NetworkNode:
	default:
		return fmt.Errorf("network %q: use none (the default: the jobs' VMs reach only their own file server) or node (the site's network through the node, never the node itself or the controllers)", p.Network)
	}
	if p.Network == NetworkNode && p.Share == ShareVirtiofs {
		return fmt.Errorf("network node needs the nfs share (a virtiofs VM has no network card): drop share virtiofs, or use network none")
	}
	switch p.Warm {
	case "", WarmYes, WarmNo:
	default:
		return fmt.Errorf("warm %q: use yes (the default: the jobs' VMs may be restored from a snapshot of a booted guest) or no (every VM boots)", p.Warm)
	}
	return nil
}

// HasNode reports whether node name is configured for the partition.
func (p *Partition) HasNode(name string) bool { return slices.Contains(p.Nodes, name) }

// PartitionRequest adds, changes or deletes a partition: Create adds it
// (with the defaults where Settings say nothing), Delete deletes it, and
// neither changes the settings named on an existing one.
type PartitionRequest struct {
	Name     string      `json:"name"`
	Settings [][2]string `json:"settings,omitempty"`
	Create   bool        `json:"create,omitempty"`
	Delete   bool        `json:"delete,omitempty"`
}
