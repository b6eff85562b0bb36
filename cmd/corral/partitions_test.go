package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadPartitionsFile(t *testing.T) {
	tests := map[string]struct {
		body, err string
		shared    string
	}{
		"shared paths":               {body: `[{"name": "batch", "default": true, "shared_paths": ["/home", "/scratch"]}]`, shared: "/home"},
		"misspelt field":             {body: `[{"name": "batch", "shared_path": ["/home"]}]`, err: `unknown field "shared_path"`},
		"relative path":              {body: `[{"name": "batch", "shared_paths": ["home"]}]`, err: `shared path "home"`},
		"nfs accepted":               {body: `[{"name": "batch", "share": "nfs"}]`},
		"unknown share":              {body: `[{"name": "batch", "share": "9p"}]`, err: `share "9p": use nfs`},
		"two defaults":               {body: `[{"name": "a", "default": true}, {"name": "b", "default": true}]`, err: "mark one"},
		"unknown network":            {body: `[{"name": "a", "network": "internet"}]`, err: `network "internet"`},
		"no partitions":              {body: `[]`, err: "no partitions"},
		"duplicate name":             {body: `[{"name": "a"}, {"name": "a"}]`, err: "listed twice"},
		"virtiofs accepted":          {body: `[{"name": "fast", "share": "virtiofs"}]`},
		"none accepted":              {body: `[{"name": "a", "network": "none"}]`},
		"network node accepted":      {body: `[{"name": "a", "network": "node"}]`},
		"network node over virtiofs": {body: `[{"name": "a", "network": "node", "share": "virtiofs"}]`, err: "network node needs the nfs share"},
		"a root of its own":          {body: `[{"name": "rocky", "root": "/srv/roots/rocky9"}]`},
		"relative root":              {body: `[{"name": "rocky", "root": "srv/roots/rocky9"}]`, err: `root "srv/roots/rocky9": give a clean absolute path`},
		"root over virtiofs":         {body: `[{"name": "rocky", "root": "/srv/roots/rocky9", "share": "virtiofs"}]`, err: "needs the nfs share"},
		"warm starts off":            {body: `[{"name": "cold", "warm": "no"}]`},
		"lukewarm":                   {body: `[{"name": "a", "warm": "maybe"}]`, err: `warm "maybe": use yes`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "p.json")
			os.WriteFile(f, []byte(tc.body), 0o644)
			parts, err := readPartitionsFile(f)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.shared != "" && (len(parts) == 0 || len(parts[0].SharedPaths) == 0 || parts[0].SharedPaths[0] != tc.shared) {
				t.Errorf("partitions %+v lack shared path %s", parts, tc.shared)
			}
		})
	}
}
