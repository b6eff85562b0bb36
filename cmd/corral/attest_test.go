//go:build !corral_client

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttestOptions checks ctld's --tpm-policy and --attest-every.
func TestAttestOptions(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"pcrs": {"7": "`+strings.Repeat("ab", 32)+`"}, "endorsement_keys": ["`+strings.Repeat("0f", 32)+`"]}`), 0o644)
	typo := filepath.Join(dir, "typo.json")
	os.WriteFile(typo, []byte(`{"pcr": {}}`), 0o644)
	for _, c := range []struct {
		name string
		opts map[string]string
		want string
	}{
		{"none", map[string]string{}, ""},
		{"a policy", map[string]string{"tpm-policy": good, "attest-every": "5m"}, ""},
		{"no such file", map[string]string{"tpm-policy": filepath.Join(dir, "none")}, "--tpm-policy"},
		{"a misspelt field", map[string]string{"tpm-policy": typo}, "unknown field"},
		{"a bad period", map[string]string{"attest-every": "often"}, "--attest-every"},
	} {
		p, every, err := attestOptions(&optSet{last: c.opts})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v; want an error naming %q", c.name, err, c.want)
		case c.name == "a policy" && (p == nil || len(p.PCRs) != 1 || every != 5*time.Minute):
			t.Errorf("a policy: %+v every %s", p, every)
		}
	}
}
