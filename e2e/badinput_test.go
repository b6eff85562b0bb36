package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
)

func TestBadSubmissionsAreRefused(t *testing.T) {
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	work := t.TempDir()
	good := filepath.Join(work, "good.sh")
	writeFile(t, good, "#!/bin/sh\necho ok\n")
	writeFile(t, filepath.Join(work, "empty.sh"), "")
	writeFile(t, filepath.Join(work, "noshebang.sh"), "echo hi\n")
	writeFile(t, filepath.Join(work, "badmem.sh"), "#!/bin/sh\n#SBATCH --mem=4X\necho hi\n")
	big := "#!/bin/sh\n" + strings.Repeat("# padding line\n", (10<<20)/15)
	writeFile(t, filepath.Join(work, "big.sh"), big)

	cases := map[string]struct {
		args []string
		want string
	}{
		"unknown option":          {[]string{"submit", "--frobnicate", good}, "--frobnicate"},
		"unknown unit":            {[]string{"submit", "--mem=4X", good}, `unknown unit "X"`},
		"bad time":                {[]string{"submit", "--time=abc", good}, "--time"},
		"negative cpus":           {[]string{"submit", "-c", "-1", good}, "cpus-per-task"},
		"empty script":            {[]string{"submit", filepath.Join(work, "empty.sh")}, "empty"},
		"script without #!":       {[]string{"submit", filepath.Join(work, "noshebang.sh")}, "#!"},
		"10 MB script":            {[]string{"submit", filepath.Join(work, "big.sh")}, "MiB"},
		"bad directive":           {[]string{"submit", filepath.Join(work, "badmem.sh")}, "badmem.sh:2"},
		"dependency on no job":    {[]string{"submit", "--dependency=afterok:4242", good}, "4242"},
		"malformed dependency":    {[]string{"submit", "--dependency=afterwards:1", good}, "dependency"},
		"malformed array":         {[]string{"submit", "--array=5-1", good}, "array"},
		"missing script file":     {[]string{"submit", filepath.Join(work, "nope.sh")}, "nope.sh"},
		"unknown partition":       {[]string{"submit", "-p", "nosuch", good}, "nosuch"},
		"queue with unknown flag": {[]string{"queue", "--bogus"}, "--bogus"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := cli(t, c.addr, work, tc.args...)
			if err == nil {
				t.Fatalf("accepted: %q", out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}

	// Malformed JSON straight to the API.
	for name, body := range map[string]string{
		"not json":      "{jobs:",
		"wrong type":    `{"jobs": "x"}`,
		"unknown field": `{"jobs": [], "jbos": []}`,
		"trailing data": `{"jobs": []} {}`,
		"no jobs":       `{"jobs": []}`,
	} {
		resp, err := http.Post(c.http[0]+"/v1/jobs", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, 512)
		n, _ := resp.Body.Read(msg)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg[:n]), `"error"`) {
			t.Errorf("%s: status %d body %s, want 400 with a JSON error", name, resp.StatusCode, msg[:n])
		}
	}

	jobs, err := c.client(t).Jobs(context.Background(), api.JobFilter{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 0 {
		t.Fatalf("refused submissions stored %d jobs", len(jobs))
	}
	_ = os.Remove(filepath.Join(work, "big.sh"))
}
