package ctld

import (
	"context"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestUpdateJobChanges changes jobs through the API as scontrol update
// does: a running job's time limit and name (the node learns them), a
// pending job's partition, CPUs and memory, an array's throttle; a user
// may lower a limit and raise it up to the QoS's MaxWall but not past it,
// nor lower a nice value, which root may; pending-only fields of a
// running job, a job that no node could hold and an ended job are refused,
// each naming the job.
func TestUpdateJobChanges(t *testing.T) {
	c := startOne(t, HTTPTimeouts{}, func(cfg *Config) {
		cfg.Partitions = []api.Partition{{Name: "batch", Default: true}, {Name: "debug", MaxTime: 3600}}
	})
	base := "http://" + c.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func(user string) *api.Client {
		cl, err := api.NewClient(base)
		if err != nil {
			t.Fatal(err)
		}
		cl.User = user
		return cl
	}
	alice, root := client("alice"), client("root")
	if err := alice.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 4, MemMB: 4096, Runner: "test", BootID: "b", Partitions: []string{"batch", "debug"}, TmpMB: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := root.PutQOS(ctx, api.QOSRequest{QOS: api.QOS{Name: "short", MaxWall: 7200}}); err != nil {
		t.Fatal(err)
	}
	submit := func(edit func(*api.JobSpec)) uint64 {
		res, err := alice.Submit(ctx, []api.JobSpec{jobSpec(edit)})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].JobID
	}
	running := submit(func(s *api.JobSpec) { s.QOS, s.TimeLimit, s.CPUsPerTask = "short", 3600, 4 })
	pending := submit(func(s *api.JobSpec) { s.TimeLimit = 600 })
	unbounded := submit(func(s *api.JobSpec) { s.TimeLimit = 600 })
	extended := submit(func(s *api.JobSpec) { s.TimeLimit = 600 })
	array := submit(func(s *api.JobSpec) {
		s.Array = &api.ArraySpec{Raw: "0-3", Ranges: []api.ArrayRange{{First: 0, Last: 3, Step: 1}}}
	})
	waitFor(t, func() bool {
		j, err := alice.Job(ctx, running, true)
		return err == nil && j.State == api.StateRunning
	})
	i64 := func(v int64) *int64 { return &v }
	num := func(v int) *int { return &v }
	str := func(v string) *string { return &v }
	update := func(cl *api.Client, id uint64, ch api.JobChanges) error {
		return cl.UpdateJob(ctx, api.UpdateJobRequest{ID: id, Changes: &ch})
	}
	accepted := map[string]struct {
		cl *api.Client
		id uint64
		ch api.JobChanges
	}{
		"a running job's shorter limit and new name": {alice, running, api.JobChanges{TimeLimit: i64(1800), Name: str("renamed")}},
		"raised again, within the QoS's MaxWall":     {alice, running, api.JobChanges{TimeLimit: i64(7200)}},
		"a pending job moved, resized":               {alice, pending, api.JobChanges{Partition: str("debug"), NumTasks: num(2), NumCPUs: num(4), MinMemoryNode: i64(1024), MinTmpDiskNode: i64(500), Comment: str("moved")}},
		"a higher nice":                              {alice, pending, api.JobChanges{Nice: num(10)}},
		"root lowers it":                             {root, pending, api.JobChanges{Nice: num(-5)}},
		"root raises a limit past every bound":       {root, extended, api.JobChanges{TimeLimit: i64(86400)}},
		"an array's throttle":                        {alice, array, api.JobChanges{ArrayTaskThrottle: num(1)}},
	}
	for _, name := range []string{"a running job's shorter limit and new name", "raised again, within the QoS's MaxWall",
		"a pending job moved, resized", "a higher nice", "root lowers it", "root raises a limit past every bound", "an array's throttle"} {
		tc := accepted[name]
		if err := update(tc.cl, tc.id, tc.ch); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	refusals := map[string]struct {
		cl   *api.Client
		id   uint64
		ch   api.JobChanges
		want string
	}{
		"past the QoS's MaxWall":        {alice, running, api.JobChanges{TimeLimit: i64(7201)}, "is beyond 2h0m0s, the most QoS short's MaxWall allows"},
		"past the partition's MaxTime":  {alice, pending, api.JobChanges{TimeLimit: i64(3601)}, "is beyond 1h0m0s, the most partition debug's MaxTime allows"},
		"no bound to extend to":         {alice, unbounded, api.JobChanges{TimeLimit: i64(1200)}, "neither its QoS nor its partition sets a bound a user may extend to"},
		"a lower nice, by a user":       {alice, pending, api.JobChanges{Nice: num(-10)}, "only an operator or administrator may do that"},
		"a running job's partition":     {alice, running, api.JobChanges{Partition: str("debug")}, "is RUNNING; Partition can change only while it is pending"},
		"more CPUs than any node":       {alice, pending, api.JobChanges{NumCPUs: num(16)}, "Requested node configuration is not available"},
		"NumCPUs not per task":          {alice, pending, api.JobChanges{NumCPUs: num(3)}, "NumCPUs=3 is not a multiple of its 2 tasks"},
		"a throttle on no array":        {alice, pending, api.JobChanges{ArrayTaskThrottle: num(2)}, "is no array"},
		"an unknown QoS":                {alice, pending, api.JobChanges{QOS: str("nosuch")}, `invalid QoS "nosuch"`},
		"a name with a newline":         {alice, pending, api.JobChanges{Name: str("a\nb")}, "control character"},
		"a running job's scratch space": {alice, running, api.JobChanges{MinTmpDiskNode: i64(100)}, "is RUNNING; MinTmpDiskNode can change only while it is pending"},
		"more scratch space than any node": {alice, pending, api.JobChanges{MinTmpDiskNode: i64(1001)},
			"Requested node configuration is not available: the job asks for 1001 MiB of scratch space (--tmp); the largest node of partition debug (n1) has 1000 MiB"},
		"negative scratch space": {alice, pending, api.JobChanges{MinTmpDiskNode: i64(-1)}, "--tmp must be from 0 to"},
	}
	for name, tc := range refusals {
		err := update(tc.cl, tc.id, tc.ch)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "job ") {
			t.Errorf("%s: %v; want a refusal naming the job and saying %q", name, err, tc.want)
		}
	}
	j, err := alice.Job(ctx, running, true)
	if err != nil {
		t.Fatal(err)
	}
	if j.Spec.TimeLimit != 7200 || j.Spec.Name != "renamed" {
		t.Errorf("the running job: limit %d, name %q; want 7200 and renamed", j.Spec.TimeLimit, j.Spec.Name)
	}
	d, err := alice.Desired(ctx, "n1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Allocations) != 1 || d.Allocations[0].Job.Spec.TimeLimit != 7200 {
		t.Errorf("the node's desired state does not carry the new limit: %+v", d.Allocations)
	}
	p, err := alice.Job(ctx, pending, true)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Spec; s.Partition != "debug" || s.NTasks != 2 || s.CPUsPerTask != 2 || s.MemPerNode != 1024 || s.TmpMB != 500 || s.Nice != -5 || s.Comment != "moved" {
		t.Errorf("the pending job after its updates: %+v", s)
	}
	if a, err := alice.Job(ctx, array, true); err != nil || a.Spec.Array == nil || a.Spec.Array.Throttle != 1 {
		t.Errorf("the array after its update: %+v, %v", a, err)
	}
}
