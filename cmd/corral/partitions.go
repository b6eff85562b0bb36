package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"corral/api"
)

// readPartitionsFile reads --partitions-file: a JSON list of partitions
// with the fields of api.Partition. Unknown fields are refused, so that a
// misspelt setting is not silently ignored.
func readPartitionsFile(path string) ([]api.Partition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--partitions-file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var parts []api.Partition
	if err := dec.Decode(&parts); err != nil {
		return nil, fmt.Errorf("--partitions-file %s: %v (want a JSON list such as [{\"name\": \"batch\", \"default\": true, \"shared_paths\": [\"/home\"]}])", path, err)
	}
	seen := map[string]bool{}
	defaults := 0
	for i, p := range parts {
		if p.Name == "" {
			return nil, fmt.Errorf("--partitions-file %s: partition %d has no name", path, i+1)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("--partitions-file %s: partition %s is listed twice", path, p.Name)
		}
		seen[p.Name] = true
		if p.Default {
			defaults++
		}
		for _, sp := range p.SharedPaths {
			if !filepath.IsAbs(sp) || filepath.Clean(sp) != sp || sp == "/" {
				return nil, fmt.Errorf("--partitions-file %s: partition %s: shared path %q: give a clean absolute path other than /", path, p.Name, sp)
			}
		}
		switch p.Share {
		case "", "nfs", "virtiofs":
		default:
			return nil, fmt.Errorf("--partitions-file %s: partition %s: share %q: use nfs (migratable, the default) or virtiofs (faster; the VMs cannot migrate)", path, p.Name, p.Share)
		}
		if p.Root != "" && (!filepath.IsAbs(p.Root) || filepath.Clean(p.Root) != p.Root) {
			return nil, fmt.Errorf("--partitions-file %s: partition %s: root %q: give a clean absolute path (a directory on every node of the partition)", path, p.Name, p.Root)
		}
		if p.Root != "" && p.Share == "virtiofs" {
			return nil, fmt.Errorf("--partitions-file %s: partition %s: a root of its own (%s) needs the nfs share: drop share virtiofs", path, p.Name, p.Root)
		}
		switch p.Network {
		case "", "none":
		default:
			return nil, fmt.Errorf("--partitions-file %s: partition %s: network %q: only none is offered so far", path, p.Name, p.Network)
		}
	}
	if defaults > 1 {
		return nil, fmt.Errorf("--partitions-file %s: %d partitions are marked default; mark one", path, defaults)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("--partitions-file %s: no partitions", path)
	}
	return parts, nil
}
