package api

// DefaultPartition is the partition a node joins and a job goes to when
// neither names one.
const DefaultPartition = "batch"

// Partition is a named set of nodes with limits, as sinfo shows it.
// Partitions exist implicitly: a node daemon lists the partitions it serves.
type Partition struct {
	Name    string `json:"name"`
	Default bool   `json:"default"`
	// MaxTime is the longest time limit a job may ask for, in seconds; 0 is
	// unlimited.
	MaxTime int64 `json:"max_time_s"`
	// DefaultTime applies to jobs that ask for no time limit; 0 is
	// unlimited.
	DefaultTime int64    `json:"default_time_s"`
	Nodes       []string `json:"nodes"`
	// QueueUnfit keeps a job that no node of the partition could ever hold
	// (more CPUs, memory, GPUs, hugepages or VFs than any of its nodes
	// offers) pending, waiting for Resources until a larger node joins.
	// Unset, such a job is refused at submit, as Slurm refuses it:
	// "Requested node configuration is not available".
	QueueUnfit bool `json:"queue_unfit,omitempty"`

	// What a job's VM sees (docs/vm.md). Plain values, so that they move
	// with the partition when partitions become replicated records.

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
	// guest's only card reaches its own file server and nothing else) is
	// the only one today.
	Network string `json:"network,omitempty"`
	// Root is the host directory the partition's jobs get as their root
	// (read-only, under the guest's overlay) instead of the node's own /:
	// a site's own tree or an unpacked container image. Their shared
	// paths are still the node's, at the same paths. It needs the nfs
	// share. Empty is the node's root.
	Root string `json:"root,omitempty"`
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
