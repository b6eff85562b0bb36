package submit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cpusPerGPU applies --cpus-per-gpu: the job's CPUs per task become
// enough for N CPUs per GPU it asks for, as Slurm allocates them. It
// excludes -c, as in Slurm, and needs GPUs.
func (b *builder) cpusPerGPU() error {
	n := b.spec.CPUsPerGPU
	if n == 0 {
		return nil
	}
	v := strconv.Itoa(n)
	gpus := b.spec.GPUCount()
	switch {
	case b.cpusPerTaskSet:
		return optionError("--cpus-per-gpu", v, nil, "--cpus-per-gpu and --cpus-per-task are mutually exclusive; give only one")
	case gpus == 0:
		return optionError("--cpus-per-gpu", v, nil, "the job asks for no GPUs; add --gpus=N or --gres=gpu:N")
	}
	tasks := max(b.spec.NTasks, 1)
	if b.spec.Overcommit {
		tasks = 1
	}
	want := gpus * n
	if want > MaxCPUs {
		return optionError("--cpus-per-gpu", v, nil, "%d GPUs × %d CPUs is more than %d CPUs", gpus, n, MaxCPUs)
	}
	b.spec.CPUsPerTask = (want + tasks - 1) / tasks
	return nil
}

// MaxExportFileBytes bounds an --export-file.
const MaxExportFileBytes = MaxEnvBytes

// withExportFile adds the NAME=value entries of --export-file (a file, or
// a descriptor from 3 up), separated by NUL bytes as Slurm reads them, to
// env: an entry replaces a variable of the same name.
func withExportFile(env []string, from string, c Context) ([]string, error) {
	data, err := readExportFile(from, c)
	if err != nil {
		return nil, optionError("--export-file", from, err, "cannot read it: %v", err)
	}
	byName := map[string]int{}
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		byName[k] = i
	}
	out := slices.Clone(env)
	for i, kv := range strings.Split(strings.TrimRight(string(data), "\x00\n"), "\x00") {
		kv = strings.TrimSuffix(kv, "\n")
		if kv == "" {
			continue
		}
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \n") {
			return nil, optionError("--export-file", from, nil, "entry %d (%q) is not NAME=value; entries are separated by NUL bytes", i+1, Shown(kv))
		}
		if j, seen := byName[k]; seen {
			out[j] = kv
			continue
		}
		byName[k] = len(out)
		out = append(out, kv)
	}
	slices.Sort(out)
	return out, nil
}

// readExportFile reads --export-file's content: a descriptor number from 3
// up (sbatch's rule; 0 to 2 are not taken), else a file relative to the
// submit directory.
func readExportFile(from string, c Context) ([]byte, error) {
	if fd, err := strconv.Atoi(from); err == nil {
		if fd < 3 {
			return nil, fmt.Errorf("descriptor %d: give a file, or a descriptor from 3 up", fd)
		}
		f := os.NewFile(uintptr(fd), "export-file")
		if f == nil {
			return nil, fmt.Errorf("descriptor %d is not open", fd)
		}
		data := make([]byte, MaxExportFileBytes+1)
		n, err := f.Read(data)
		if err != nil && n == 0 {
			return nil, err
		}
		return data[:n], nil
	}
	path := from
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.Cwd, path)
	}
	read := c.ReadFile
	if read == nil {
		read = ReadScriptFile
	}
	data, err := read(path)
	if err == nil && len(data) > MaxExportFileBytes {
		err = fmt.Errorf("larger than %d bytes", MaxExportFileBytes)
	}
	return data, err
}
