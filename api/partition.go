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
}
