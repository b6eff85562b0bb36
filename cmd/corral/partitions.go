package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

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
		if err := p.CheckVM(); err != nil {
			return nil, fmt.Errorf("--partitions-file %s: partition %s: %v", path, p.Name, err)
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
