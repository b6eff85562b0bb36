package ctld

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"corral/api"
)

// TestUpgradeFromFormat2DataDir starts this build on a data directory that
// the controller of the last release before allocations wrote
// (testdata/datadir-v2.tar.gz, made by testdata/mkfixture.go.txt run on
// that release: a format-2 snapshot at index 17 and three log entries after
// it). Every job is there in the state it had, the node daemons' desired
// states list the running ones as allocations, a report in the old form
// (job and start index, no allocation id) ends its run, and new jobs are
// taken.
func TestUpgradeFromFormat2DataDir(t *testing.T) {
	dir := t.TempDir()
	untar(t, "testdata/datadir-v2.tar.gz", dir)
	var want []struct {
		ID    uint64       `json:"id"`
		Ref   string       `json:"ref"`
		State api.JobState `json:"state"`
		Node  string       `json:"node"`
		Name  string       `json:"name"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "jobs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	c, err := New(Config{ID: "c1", RaftAddr: addr, HTTPAddr: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"),
		Peers: []Peer{{ID: "c1", Addr: addr}}, Logger: quietLog(), NodeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	cl, _ := api.NewClient("http://" + c.HTTPAddr())
	deadline := time.Now().Add(20 * time.Second)
	for !c.isLeading() {
		if time.Now().After(deadline) {
			t.Fatal("the upgraded member did not lead within 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	jobs, err := cl.Jobs(ctx, api.JobFilter{}, true)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]api.Job{}
	for _, j := range jobs {
		got[j.ID] = j
	}
	for _, w := range want {
		j, ok := got[w.ID]
		switch {
		case !ok:
			t.Errorf("job %d (%s) is gone after the upgrade", w.ID, w.Name)
		case j.Ref() != w.Ref || j.State != w.State || j.Node != w.Node || j.Spec.Name != w.Name:
			t.Errorf("job %d: %s %s on %q named %s, want %s %s on %q named %s", w.ID, j.Ref(), j.State, j.Node, j.Spec.Name, w.Ref, w.State, w.Node, w.Name)
		}
	}
	if len(jobs) != len(want) {
		t.Errorf("%d jobs after the upgrade, want %d", len(jobs), len(want))
	}
	d, err := cl.Desired(ctx, "n1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var running *api.Allocation
	for i, a := range d.Allocations {
		if a.ID == 0 {
			t.Errorf("allocation of job %d has no id", a.Job.ID)
		}
		if a.Job.Spec.Name == "running" {
			running = &d.Allocations[i]
		}
	}
	if len(d.Allocations) != 2 || running == nil {
		t.Fatalf("n1's desired state holds %+v, want the runs of jobs running and arr_2", d.Allocations)
	}
	rep := api.JobReport{JobID: running.Job.ID, StartIndex: running.Job.StartIndex, State: api.StateCompleted}
	if err := cl.Report(ctx, api.NodeStatus{Name: "n1", BootID: "boot-1", Reports: []api.JobReport{rep}}); err != nil {
		t.Fatal(err)
	}
	if j, err := cl.Job(ctx, running.Job.ID, true); err != nil || j.State != api.StateCompleted {
		t.Errorf("job %d after a report in the old form: %+v, %v; want COMPLETED", running.Job.ID, j, err)
	}
	// Job 2's end lets the array's last task start, as job 11.
	res, err := cl.Submit(ctx, []api.JobSpec{spec("new")})
	if err != nil || len(res) != 1 || res[0].JobID <= 10 {
		t.Errorf("a new job after the upgrade: %+v, %v; want an id past the fixture's", res, err)
	}
}

// untar extracts a .tar.gz into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o700); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			out.Close()
		}
	}
}
