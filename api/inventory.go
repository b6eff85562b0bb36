package api

// Inventory is a node's hardware as its daemon discovered it: NUMA
// topology, GPUs and SR-IOV virtual functions. It travels in NodeInfo at
// registration; the scheduler places jobs inside a node with it.
type Inventory struct {
	Topology *Topology `json:"topology,omitempty"`
	GPUs     []GPU     `json:"gpus,omitempty"`
	PFs      []PF      `json:"pfs,omitempty"`
}

// Topology is a host's sockets, NUMA nodes and the SLIT distances between
// them.
type Topology struct {
	Sockets int        `json:"sockets"`
	Nodes   []NUMANode `json:"nodes"`
	// Distances[i][j] is the SLIT distance from Nodes[i] to Nodes[j]
	// (10 is local).
	Distances [][]int `json:"distances"`
}

// NUMANode is one NUMA node: its CPUs, memory and hugepages.
type NUMANode struct {
	ID   int   `json:"id"`
	CPUs []CPU `json:"cpus"`
	// MemMB and FreeMB are the node's memory in MiB, as the kernel
	// reports it in /sys/devices/system/node/nodeN/meminfo.
	MemMB  int64 `json:"mem_mb"`
	FreeMB int64 `json:"free_mb"`
	// Hugepages by page size in KiB (2048, 1048576).
	Hugepages map[int64]Hugepages `json:"hugepages,omitempty"`
}

// CPU is one logical CPU (hardware thread).
type CPU struct {
	ID     int `json:"id"`
	Core   int `json:"core"`
	Socket int `json:"socket"`
	// Siblings are the other hardware threads of the same core.
	Siblings []int `json:"siblings,omitempty"`
}

// Hugepages counts one page size's pages on a NUMA node.
type Hugepages struct {
	Total int64 `json:"total"`
	Free  int64 `json:"free"`
}

// GPU is one NVIDIA GPU as NVML reports it.
type GPU struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid"`
	Model    string `json:"model"`
	MemMB    int64  `json:"mem_mb"`
	PCIBusID string `json:"pci_bus_id"`
	// NUMANode is the node the GPU is attached to; -1 when unknown.
	NUMANode int `json:"numa_node"`
	// CPUAffinity lists the CPUs NVML reports as close to the GPU.
	CPUAffinity []int `json:"cpu_affinity,omitempty"`
	MIGEnabled  bool  `json:"mig_enabled,omitempty"`
	// MIG lists the GPU's MIG instances when MIG mode is on.
	MIG []MIGInstance `json:"mig,omitempty"`
}

// MIGInstance is one MIG slice of a GPU, such as 1g.10gb.
type MIGInstance struct {
	UUID    string `json:"uuid"`
	Profile string `json:"profile"`
	MemMB   int64  `json:"mem_mb"`
}

// PF is an SR-IOV physical function and its virtual functions.
type PF struct {
	Addr     string `json:"addr"` // PCI address, e.g. 0000:3b:00.0
	Driver   string `json:"driver,omitempty"`
	NUMANode int    `json:"numa_node"`
	TotalVFs int    `json:"total_vfs"`
	VFs      []VF   `json:"vfs,omitempty"`
}

// VF is one SR-IOV virtual function.
type VF struct {
	Addr       string `json:"addr"`
	Driver     string `json:"driver,omitempty"`
	IOMMUGroup int    `json:"iommu_group"`
	NUMANode   int    `json:"numa_node"`
}

// Placement is the exact set of resources a job got inside its node.
type Placement struct {
	CPUs []int `json:"cpus,omitempty"`
	// Idle are CPUs the job holds but does not run on: the other threads
	// of the cores it got one thread of (--hint=nomultithread,
	// --threads-per-core=1), kept from every other job.
	Idle      []int `json:"idle,omitempty"`
	NUMANodes []int `json:"numa_nodes,omitempty"`
	// Mem is the job's memory by NUMA node.
	Mem       []NodeAmount     `json:"mem,omitempty"`
	Hugepages []HugepageAmount `json:"hugepages,omitempty"`
	// GPUs are whole GPUs' UUIDs; MIG are MIG instances' UUIDs.
	GPUs []string `json:"gpus,omitempty"`
	MIG  []string `json:"mig,omitempty"`
	// VFs are SR-IOV virtual functions' PCI addresses.
	VFs []string `json:"vfs,omitempty"`
	// Score is how well the set fits (100: all on one NUMA node).
	Score int `json:"score"`
}

// NodeAmount is an amount of memory (MiB) on one NUMA node.
type NodeAmount struct {
	Node int   `json:"node"`
	MB   int64 `json:"mb"`
}

// HugepageAmount is a number of hugepages of one size on one NUMA node.
type HugepageAmount struct {
	Node   int   `json:"node"`
	SizeKB int64 `json:"size_kb"`
	Count  int64 `json:"count"`
}

// HugepageRequest is --hugepages=2M:COUNT or 1G:COUNT.
type HugepageRequest struct {
	SizeKB int64 `json:"size_kb"`
	Count  int64 `json:"count"`
}

// NUMA policies (--numa).
const (
	NUMAPrefer = "prefer" // the default: as local as possible
	NUMAStrict = "strict" // CPUs, memory and devices on the chosen nodes only
	NUMANone   = "none"   // ignore the topology
)
