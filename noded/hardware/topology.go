package hardware

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/jaypipes/ghw"
	ghwcpu "github.com/jaypipes/ghw/pkg/cpu"
	ghwtopology "github.com/jaypipes/ghw/pkg/topology"

	"corral/api"
)

// Page sizes, in KiB, as they key api.NUMANode.Hugepages.
const (
	HugepageSize2M int64 = 2048
	HugepageSize1G int64 = 1048576
)

// localDistance is the SLIT distance of a node to itself; Linux rejects a
// SLIT whose diagonal is anything else.
const localDistance = 10

// Errors Topology wraps; check them with errors.Is.
var (
	// ErrNoNUMANodes means ghw found no NUMA node under the root.
	ErrNoNUMANodes = errors.New("no NUMA nodes found")
	// ErrDistances means a node's SLIT distance row is missing, has the
	// wrong length or an impossible value.
	ErrDistances = errors.New("NUMA distances missing or inconsistent")
	// ErrIncomplete means a CPU's package or core, or a node's memory, could
	// not be read.
	ErrIncomplete = errors.New("incomplete CPU or memory data")
)

// Topology reads the topology of the host whose filesystem is at root: ""
// or "/" is this host; any other directory is a fixture tree holding sys/
// and proc/ laid out as on a real host (see WriteTopologyFixture). It reads through
// ghw's chroot option, so GHW_CHROOT does not apply.
//
// Topology returns an error naming root when ghw finds no NUMA node (ghw
// itself returns err == nil then), when distances are missing or
// inconsistent, or when a CPU's package or core id, or a node's MemFree,
// cannot be read.
func Topology(root string) (*api.Topology, error) {
	if root == "" {
		root = "/"
	}
	warnings := &warningLog{}
	opts := []any{ghw.WithChroot(root), ghw.WithLogger(warnings.logger())}

	info, err := ghw.Topology(opts...)
	if err != nil {
		return nil, fmt.Errorf("topology of %q: %w%s", root, err, warnings.suffix())
	}
	if len(info.Nodes) == 0 {
		return nil, fmt.Errorf("topology of %q: %w%s (each sys/devices/system/node/nodeN needs "+
			"meminfo, distance and hugepages/, and proc/meminfo needs Hugepagesize: and Hugetlb: lines, "+
			"which kernels before 4.16 do not write)",
			root, ErrNoNUMANodes, warnings.suffix())
	}
	cpuInfo, err := ghw.CPU(opts...)
	if err != nil {
		return nil, fmt.Errorf("CPUs of %q: %w%s", root, err, warnings.suffix())
	}
	cpus := cpusByID(cpuInfo)

	ghwNodes := slices.Clone(info.Nodes)
	slices.SortFunc(ghwNodes, func(a, b *ghwtopology.Node) int { return a.ID - b.ID })

	topo := &api.Topology{
		Sockets:   len(cpuInfo.Processors),
		Nodes:     make([]api.NUMANode, 0, len(ghwNodes)),
		Distances: make([][]int, 0, len(ghwNodes)),
	}
	for i, gn := range ghwNodes {
		row, err := distanceRow(gn, i, len(ghwNodes))
		if err != nil {
			return nil, fmt.Errorf("topology of %q: %w%s", root, err, warnings.suffix())
		}
		node, err := numaNode(root, gn, cpus)
		if err != nil {
			return nil, fmt.Errorf("topology of %q: %w%s", root, err, warnings.suffix())
		}
		topo.Nodes = append(topo.Nodes, node)
		topo.Distances = append(topo.Distances, row)
	}
	return topo, nil
}

// cpusByID indexes ghw's CPU info by logical processor id. ghw groups the
// threads of a core by (package id, core id), so Siblings stay right even
// where core ids repeat across packages inside one NUMA node.
func cpusByID(info *ghw.CPUInfo) map[int]api.CPU {
	cpus := make(map[int]api.CPU)
	for _, proc := range info.Processors {
		for _, core := range proc.Cores {
			for _, id := range core.LogicalProcessors {
				cpus[id] = api.CPU{
					ID:       id,
					Core:     core.ID,
					Socket:   proc.ID,
					Siblings: siblingsOf(id, core),
				}
			}
		}
	}
	return cpus
}

// siblingsOf returns the other logical processors of core, sorted, or nil
// when id is the core's only thread.
func siblingsOf(id int, core *ghwcpu.ProcessorCore) []int {
	var siblings []int
	for _, other := range core.LogicalProcessors {
		if other != id {
			siblings = append(siblings, other)
		}
	}
	slices.Sort(siblings)
	return siblings
}

// distanceRow checks node gn's SLIT row against the n nodes ghw returned.
// A row longer than n means ghw dropped a node after a warning.
func distanceRow(gn *ghwtopology.Node, index, n int) ([]int, error) {
	row := gn.Distances
	if len(row) != n {
		return nil, fmt.Errorf("node %d: %w: %d distances for %d nodes "+
			"(read sys/devices/system/node/node%d/distance and check every node directory)",
			gn.ID, ErrDistances, len(row), n, gn.ID)
	}
	for j, d := range row {
		if j == index && d != localDistance {
			return nil, fmt.Errorf("node %d: %w: distance to itself is %d, not %d",
				gn.ID, ErrDistances, d, localDistance)
		}
		if d < localDistance {
			return nil, fmt.Errorf("node %d: %w: distance %d in column %d is below %d",
				gn.ID, ErrDistances, d, j, localDistance)
		}
	}
	return slices.Clone(row), nil
}

// numaNode converts one ghw node, taking each CPU's core, package and
// siblings from cpus and the node's free memory from its meminfo.
func numaNode(root string, gn *ghwtopology.Node, cpus map[int]api.CPU) (api.NUMANode, error) {
	node := api.NUMANode{ID: gn.ID, CPUs: []api.CPU{}}
	for _, core := range gn.Cores {
		for _, id := range core.LogicalProcessors {
			c, ok := cpus[id]
			if !ok || c.Core < 0 || c.Socket < 0 {
				return api.NUMANode{}, fmt.Errorf("node %d, cpu %d: %w: no package or core id "+
					"(read sys/devices/system/cpu/cpu%d/topology and its block in proc/cpuinfo)",
					gn.ID, id, ErrIncomplete, id)
			}
			node.CPUs = append(node.CPUs, c)
		}
	}
	slices.SortFunc(node.CPUs, func(a, b api.CPU) int { return a.ID - b.ID })

	if gn.Memory == nil {
		return api.NUMANode{}, fmt.Errorf("node %d: %w: ghw returned no memory area", gn.ID, ErrIncomplete)
	}
	node.MemMB = gn.Memory.TotalUsableBytes / (1 << 20)
	freeKiB, err := nodeMemFreeKiB(root, gn.ID)
	if err != nil {
		return api.NUMANode{}, err
	}
	node.FreeMB = freeKiB / 1024

	if len(gn.Memory.HugePageAmountsBySize) > 0 {
		node.Hugepages = make(map[int64]api.Hugepages, len(gn.Memory.HugePageAmountsBySize))
		for sizeBytes, amounts := range gn.Memory.HugePageAmountsBySize {
			node.Hugepages[int64(sizeBytes/1024)] = api.Hugepages{Total: amounts.Total, Free: amounts.Free}
		}
	}
	return node, nil
}

// nodeMemFreeKiB reads "Node N MemFree: X kB" from the node's meminfo under
// root; ghw reads only MemTotal from that file.
func nodeMemFreeKiB(root string, nodeID int) (int64, error) {
	path := filepath.Join(root, "sys", "devices", "system", "node", "node"+strconv.Itoa(nodeID), "meminfo")
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("node %d: %w: %w", nodeID, ErrIncomplete, err)
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		// The kernel writes "Node 0 MemFree:         4546236 kB".
		fields := strings.Fields(scanner.Text())
		if len(fields) < 4 || fields[2] != "MemFree:" {
			continue
		}
		kib, err := strconv.ParseInt(fields[3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("node %d: %w: %s: MemFree %q: %w", nodeID, ErrIncomplete, path, fields[3], err)
		}
		return kib, nil
	}
	if err := scanner.Err(); err != nil {
		return 0, fmt.Errorf("node %d: %w: %s: %w", nodeID, ErrIncomplete, path, err)
	}
	return 0, fmt.Errorf("node %d: %w: %s has no MemFree line", nodeID, ErrIncomplete, path)
}
