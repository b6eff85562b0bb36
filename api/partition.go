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
}
