package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Root is where the cgroup file systems are mounted.
const Root = "/sys/fs/cgroup"

// Manager creates job groups in one host's cgroup layout.
type Manager struct {
	v2 bool
	// base holds the corral directory of each hierarchy: one for v2, the
	// cpuset, memory and cpuacct ones for v1.
	base map[string]string
}

// Limits are what a job's group may use.
type Limits struct {
	// CPUs are the host CPU ids the group may run on (cpuset.cpus); empty
	// leaves the parent's.
	CPUs []int
	// Mems are the NUMA nodes its memory may come from; empty leaves the
	// parent's.
	Mems []int
	// MemBytes is the memory limit; 0 is none.
	MemBytes int64
}

// Usage is what a group's processes used over its life.
type Usage struct {
	CPU       time.Duration
	PeakBytes int64
}

// Detect finds the host's cgroup layout and prepares corral's directory in
// it. Its error says why groups cannot be used here.
func Detect() (*Manager, error) {
	if isCgroup2(Root) {
		return detectV2(Root)
	}
	if isCgroup2(filepath.Join(Root, "unified")) && !exists(filepath.Join(Root, "memory")) {
		return detectV2(filepath.Join(Root, "unified"))
	}
	return detectV1()
}

func isCgroup2(dir string) bool { return exists(filepath.Join(dir, "cgroup.controllers")) }

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func detectV2(root string) (*Manager, error) {
	ctrl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	for _, c := range []string{"cpuset", "memory", "cpu"} {
		if !strings.Contains(" "+strings.TrimSpace(string(ctrl))+" ", " "+c+" ") {
			return nil, fmt.Errorf("cgroup v2 at %s lacks the %s controller (it has %q)", root, c, strings.TrimSpace(string(ctrl)))
		}
	}
	base := filepath.Join(root, "corral")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	for _, dir := range []string{root, base} {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpuset +memory +cpu"), 0o644); err != nil {
			return nil, fmt.Errorf("cgroup v2: enabling cpuset, memory and cpu in %s: %w", dir, err)
		}
	}
	return &Manager{v2: true, base: map[string]string{"": base}}, nil
}

// v1Controllers are the hierarchies a v1 job group lives in.
var v1Controllers = []string{"cpuset", "memory", "cpuacct"}

func detectV1() (*Manager, error) {
	own, err := ownGroups()
	if err != nil {
		return nil, err
	}
	m := &Manager{base: map[string]string{}}
	for _, c := range v1Controllers {
		mount := filepath.Join(Root, c)
		if !exists(filepath.Join(mount, "cgroup.procs")) {
			return nil, fmt.Errorf("no cgroup v2 and no cgroup v1 %s hierarchy at %s", c, mount)
		}
		base := filepath.Join(mount, own[c], "corral")
		if err := os.MkdirAll(base, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v1 %s: %w", c, err)
		}
		m.base[c] = base
	}
	// A v1 cpuset group takes no task before its cpus and mems are set:
	// corral's own takes its parent's.
	if err := inheritCpuset(m.base["cpuset"]); err != nil {
		return nil, err
	}
	return m, nil
}

// ownGroups reads the daemon's v1 groups from /proc/self/cgroup.
func ownGroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	own := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, sc.Err()
}

func inheritCpuset(dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		cur, _ := os.ReadFile(filepath.Join(dir, f))
		if strings.TrimSpace(string(cur)) != "" {
			continue
		}
		parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
		if err != nil {
			return fmt.Errorf("cgroup v1 cpuset: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
			return fmt.Errorf("cgroup v1 cpuset: %s: %w", f, err)
		}
	}
	return nil
}

// Version names the layout: "v2" or "v1".
func (m *Manager) Version() string {
	if m.v2 {
		return "v2"
	}
	return "v1"
}

// Group is one job's control group.
type Group struct {
	v2    bool
	dirs  map[string]string // per hierarchy ("" for v2)
	limit int64
}

// Create makes (or takes over) the group name with limits l. A group left
// by an earlier run of the same name is reused.
func (m *Manager) Create(name string, l Limits) (*Group, error) {
	g := m.Open(name)
	g.limit = l.MemBytes
	for _, dir := range g.dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", name, err)
		}
	}
	memFile := "memory.max"
	cpusetDir := g.dirs[""]
	if !m.v2 {
		memFile = "memory.limit_in_bytes"
		cpusetDir = g.dirs["cpuset"]
		if err := inheritCpuset(cpusetDir); err != nil {
			return nil, err
		}
	}
	writes := map[string]string{}
	if len(l.CPUs) > 0 {
		writes[filepath.Join(cpusetDir, "cpuset.cpus")] = idList(l.CPUs)
	}
	if len(l.Mems) > 0 {
		writes[filepath.Join(cpusetDir, "cpuset.mems")] = idList(l.Mems)
	}
	if l.MemBytes > 0 {
		dir := g.dirs[""]
		if !m.v2 {
			dir = g.dirs["memory"]
		}
		writes[filepath.Join(dir, memFile)] = strconv.FormatInt(l.MemBytes, 10)
	}
	for path, val := range writes {
		if err := os.WriteFile(path, []byte(val), 0o644); err != nil {
			return nil, fmt.Errorf("cgroup %s: writing %s to %s: %w", name, val, path, err)
		}
	}
	return g, nil
}

// Open returns the group name without creating it (for a re-attaching
// daemon, whose VM joined it already).
func (m *Manager) Open(name string) *Group {
	g := &Group{v2: m.v2, dirs: map[string]string{}}
	for c, base := range m.base {
		g.dirs[c] = filepath.Join(base, name)
	}
	return g
}

// Add moves process pid into the group (every hierarchy under v1).
func (g *Group) Add(pid int) error {
	for c, dir := range g.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("cgroup %s: adding pid %d: %w", c, pid, err)
		}
	}
	return nil
}

// Usage reads the CPU time and peak memory of the group's processes so
// far.
func (g *Group) Usage() (Usage, error) {
	var u Usage
	if g.v2 {
		stat, err := os.ReadFile(filepath.Join(g.dirs[""], "cpu.stat"))
		if err != nil {
			return u, err
		}
		for _, line := range strings.Split(string(stat), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, _ := strconv.ParseInt(v, 10, 64)
				u.CPU = time.Duration(us) * time.Microsecond
			}
		}
		u.PeakBytes, err = readInt(filepath.Join(g.dirs[""], "memory.peak"))
		return u, err
	}
	ns, err := readInt(filepath.Join(g.dirs["cpuacct"], "cpuacct.usage"))
	if err != nil {
		return u, err
	}
	u.CPU = time.Duration(ns)
	u.PeakBytes, err = readInt(filepath.Join(g.dirs["memory"], "memory.max_usage_in_bytes"))
	return u, err
}

// Remove deletes the group; it must have no process left.
func (g *Group) Remove() error {
	var errs []error
	for _, dir := range g.dirs {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// idList writes ids as a cpuset list ("0,2,3").
func idList(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}
