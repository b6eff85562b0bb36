package state

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"corral/api"
)

// logBuilder numbers entries as Raft would; add returns the entry's index
// (a plan's index is the StartIndex its jobs' reports must carry).
type logBuilder struct {
	t    *testing.T
	logs []*logEntry
}

func (b *logBuilder) add(ct CommandType, p any) uint64 {
	i := uint64(len(b.logs) + 1)
	b.logs = append(b.logs, entry(b.t, i, ct, p))
	return i
}

func afterok(ids ...string) *Dependency {
	return &Dependency{Raw: "afterok:" + strings.Join(ids, ":"), Clauses: []DepClause{{Type: "afterok", JobIDs: ids}}}
}

func arraySpec(name, ranges string, first, last int) JobSpec {
	s := spec(name)
	s.Array = &api.ArraySpec{Raw: ranges, Ranges: []api.ArrayRange{{First: first, Last: last, Step: 1}}}
	return s
}

func done(id, start uint64, st api.JobState) api.JobReport {
	return api.JobReport{JobID: id, StartIndex: start, State: st}
}

// Times of the retention scenario: jobs submitted at t0 start at t0+50s;
// "old" ends are at t0+100s, "recent" ones at t0+990s; the purge runs at
// t0+1000s with the default MinJobAge (300 s), so old ends are due and
// recent ones are not.
var (
	tStart   = t0.Add(50 * time.Second)
	tOld     = t0.Add(100 * time.Second)
	tRecent  = t0.Add(990 * time.Second)
	tPurgeAt = t0.Add(1000 * time.Second)
)

// retentionLog builds the scenario of TestPurgeDecidesWhatGoes and ends
// with one PurgeJobs entry.
func retentionLog(t *testing.T) []*logEntry {
	b := &logBuilder{t: t}
	b.add(CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 32, MemMB: 64 << 10, Runner: "process", BootID: "b1"}})
	held := spec("pending")
	held.Hold = true
	dependant := spec("dependant")
	dependant.Dependency, dependant.Hold = afterok("5"), true
	doneDependant := spec("done-dependant")
	doneDependant.Dependency = afterok("7")
	b.add(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{
		spec("running"), held, spec("just-finished"), spec("old-finished"), spec("failed-target"),
		dependant, spec("done-target"), doneDependant,
	}})
	wholeDep, taskDep := spec("on-array-60"), spec("on-task-80_0")
	wholeDep.Dependency, wholeDep.Hold = afterok("60"), true
	taskDep.Dependency, taskDep.Hold = afterok("80_0"), true
	b.add(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 20, Jobs: []JobSpec{arraySpec("a20", "0-3", 0, 3)}})
	b.add(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 40, Jobs: []JobSpec{arraySpec("a40", "0-1", 0, 1)}})
	b.add(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 50, Jobs: []JobSpec{arraySpec("a50", "0-1", 0, 1)}})
	b.add(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 60, Jobs: []JobSpec{arraySpec("a60", "0-1", 0, 1)}})
	b.add(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 70, Jobs: []JobSpec{wholeDep}})
	b.add(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 80, Jobs: []JobSpec{arraySpec("a80", "0-1", 0, 1), taskDep}})
	start := func(id uint64) PlanStart { return PlanStart{JobID: id, Node: "n1", CPUs: 1, MemMB: 100} }
	task := func(arr uint64, task int, newID uint64) PlanStart {
		st := start(arr)
		st.Array, st.Task, st.NewID = true, task, newID
		return st
	}
	plan := b.add(CmdApplyPlan, &ApplyPlan{Now: tStart, Starts: []PlanStart{
		start(1), start(3), start(4), start(5), start(7),
		task(20, 0, 30), task(20, 1, 31), task(20, 2, 32),
		task(40, 0, 45), task(40, 1, 0),
		task(50, 0, 55), task(50, 1, 0),
		task(60, 0, 65), task(60, 1, 0),
		task(80, 0, 85), task(80, 1, 0),
	}})
	b.add(CmdJobReports, &JobReports{Now: tOld, Node: "n1", BootID: "b1", Reports: []api.JobReport{
		done(4, plan, api.StateCompleted), done(5, plan, api.StateFailed), done(7, plan, api.StateCompleted),
		done(30, plan, api.StateCompleted), done(31, plan, api.StateCompleted),
		done(40, plan, api.StateCompleted),
		done(55, plan, api.StateCompleted), done(50, plan, api.StateCompleted),
		done(65, plan, api.StateFailed), done(60, plan, api.StateCompleted),
		done(85, plan, api.StateCompleted), done(80, plan, api.StateCompleted),
	}})
	b.add(CmdCancelJobs, &CancelJobs{Now: tOld, IDs: []uint64{8}, By: "alice"})
	b.add(CmdJobReports, &JobReports{Now: tRecent, Node: "n1", BootID: "b1", Reports: []api.JobReport{done(3, plan, api.StateCompleted)}})
	b.add(CmdPurgeJobs, &PurgeJobs{Now: tPurgeAt})
	return b.logs
}

func TestPurgeDecidesWhatGoes(t *testing.T) {
	logs := retentionLog(t)
	f := newReplica()
	applyAll(t, f, logs[:len(logs)-1])
	res, _ := f.Apply(logs[len(logs)-1]).(*PurgeResult)
	if res == nil || res.Jobs != 7 || res.Held != 6 || res.More {
		t.Fatalf("purge result %+v: want 7 jobs removed, 6 held back, no more", res)
	}
	cases := map[string]struct {
		ids  []uint64
		kept bool
	}{
		"running job":                          {[]uint64{1}, true},
		"pending job":                          {[]uint64{2}, true},
		"job that finished within MinJobAge":   {[]uint64{3}, true},
		"job that finished before MinJobAge":   {[]uint64{4}, false},
		"FAILED target of a pending afterok":   {[]uint64{5}, true},
		"the pending dependant":                {[]uint64{6}, true},
		"target of a finished dependant":       {[]uint64{7, 8}, false},
		"array head with tasks pending":        {[]uint64{20}, true},
		"finished task records":                {[]uint64{30, 31}, false},
		"running task record":                  {[]uint64{32}, true},
		"finished head while a task runs":      {[]uint64{40}, true},
		"task record that still runs":          {[]uint64{45}, true},
		"every record of a finished array":     {[]uint64{50, 55}, false},
		"array named by a pending afterok":     {[]uint64{60, 65}, true},
		"array whose task 80_0 a job names":    {[]uint64{80, 85}, true},
		"pending jobs naming arrays and tasks": {[]uint64{70, 81}, true},
	}
	f.Read(func(s *State) {
		for name, c := range cases {
			for _, id := range c.ids {
				if _, ok := s.Jobs[id]; ok != c.kept {
					t.Errorf("%s: job %d kept=%v, want %v", name, id, ok, c.kept)
				}
			}
		}
		indexes := map[string]struct{ got, want any }{
			"tasks of array 20": {taskRefs(s, 20), []int{2}},
			"records of 20":     {s.ArrayTasks[20], []uint64{32}},
			"records of 40":     {s.ArrayTasks[40], []uint64{45, 40}},
			"records of 50":     {s.ArrayTasks[50], []uint64(nil)},
			"tasks of array 50": {taskRefs(s, 50), []int(nil)},
			"records of 60":     {s.ArrayTasks[60], []uint64{65, 60}},
			"finished index":    {len(s.finished), 7}, // 3, 5, 40, 65, 60, 85, 80
		}
		for name, c := range indexes {
			if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
				t.Errorf("%s: got %v, want %v", name, c.got, c.want)
			}
		}
		for _, ref := range s.finished {
			if j := s.Jobs[ref.id]; j == nil || !j.State.Terminal() {
				t.Errorf("finished index names job %d, which is not a finished job", ref.id)
			}
		}
		if n := s.Requests.Len(); n != len(s.Requests.gens[0].byUser["alice"]) || n != 15 {
			t.Errorf("request ids: %d remembered, want all 15 (their retention is 24 h)", n)
		}
	})
}

func taskRefs(s *State, array uint64) []int {
	var out []int
	for ref := range s.Tasks {
		if ref.Array == array {
			out = append(out, ref.Task)
		}
	}
	slices.Sort(out)
	return out
}

// TestPurgeJobsRoundTrip is the snapshot→restore test of PurgeJobs: a
// replica restored from a snapshot at any point of the retention log, then
// fed the rest, ends in the same state as one that applied it all.
func TestPurgeJobsRoundTrip(t *testing.T) {
	logs := retentionLog(t)
	for i := range logs {
		f, g := restoreAfter(t, logs, i+1)
		// One more purge, far later, must also agree: the restored
		// indexes decide it.
		late := entry(t, uint64(len(logs)+1), CmdPurgeJobs, &PurgeJobs{Now: tPurgeAt.Add(time.Hour)})
		rf, rg := f.Apply(late).(*PurgeResult), g.Apply(late).(*PurgeResult)
		if *rf != *rg || f.Hash() != g.Hash() {
			t.Fatalf("after entry %d: a later purge removed %+v on one replica and %+v on the restored one", i+1, rf, rg)
		}
	}
}

func TestPurgeJobsReplayedAlike(t *testing.T) {
	logs := retentionLog(t)
	var hashes []string
	for i := 0; i < 3; i++ {
		f := newReplica()
		applyAll(t, f, logs)
		hashes = append(hashes, f.Hash())
	}
	if hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Fatalf("replicas disagree: %v", hashes)
	}
	f := newReplica()
	applyAll(t, f, logs[:len(logs)-1])
	if f.Hash() == hashes[0] {
		t.Fatal("the hash does not see what the purge removed")
	}
}

func TestPurgeIsBoundedPerEntry(t *testing.T) {
	f := newReplica()
	b := &logBuilder{t: t}
	var specs []JobSpec
	for i := 0; i < 25; i++ {
		specs = append(specs, spec(fmt.Sprint("j", i)))
	}
	b.add(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: specs})
	ids := make([]uint64, 25)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	b.add(CmdCancelJobs, &CancelJobs{Now: t0, IDs: ids})
	applyAll(t, f, b.logs)
	var got []PurgeResult
	for i := 0; i < 3; i++ {
		r := f.Apply(entry(t, uint64(3+i), CmdPurgeJobs, &PurgeJobs{Now: tPurgeAt, Max: 10})).(*PurgeResult)
		got = append(got, *r)
	}
	want := []PurgeResult{{Jobs: 10, More: true}, {Jobs: 10, More: true}, {Jobs: 5}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("three purges of at most 10 over 25 due jobs: got %+v, want %+v", got, want)
	}
	f.Read(func(s *State) {
		if len(s.Jobs) != 0 || len(s.finished) != 0 {
			t.Errorf("%d jobs and %d finished refs left, want none", len(s.Jobs), len(s.finished))
		}
	})
}

func TestRequestIDs(t *testing.T) {
	bob := func(name string) JobSpec { s := spec(name); s.User = "bob"; return s }
	type submit struct {
		at   time.Duration
		spec JobSpec
		want api.SubmitResult
	}
	cases := map[string]struct {
		config [][2]string
		steps  []any // submit or purge (a duration after t0)
	}{
		"scoped per user": {steps: []any{
			submit{0, spec("x"), api.SubmitResult{JobID: 1}},
			submit{0, bob("x"), api.SubmitResult{JobID: 2}},
			submit{0, spec("x"), api.SubmitResult{JobID: 1, Duplicate: true}},
			submit{0, bob("x"), api.SubmitResult{JobID: 2, Duplicate: true}},
		}},
		"a retry after the job was purged gets the original id": {steps: []any{
			submit{0, spec("x"), api.SubmitResult{JobID: 1}},
			cancelAt(0, 1),
			purgeAt(time.Hour),
			submit{time.Hour, spec("x"), api.SubmitResult{JobID: 1, Duplicate: true}},
		}},
		"forgotten after the retention window": {config: [][2]string{{"RequestIDRetention", "1h"}}, steps: []any{
			submit{0, spec("x"), api.SubmitResult{JobID: 1}},
			submit{20 * time.Minute, spec("y"), api.SubmitResult{JobID: 2}}, // a new generation
			purgeAt(time.Hour),
			submit{time.Hour, spec("x"), api.SubmitResult{JobID: 1, Duplicate: true}},
			purgeAt(time.Hour + time.Second),
			submit{time.Hour + time.Second, spec("x"), api.SubmitResult{JobID: 4}},
			submit{time.Hour + time.Second, spec("y"), api.SubmitResult{JobID: 2, Duplicate: true}},
			purgeAt(80*time.Minute + time.Second),
			submit{80*time.Minute + time.Second, spec("y"), api.SubmitResult{JobID: 6}},
		}},
		"kept forever with retention 0": {config: [][2]string{{"RequestIDRetention", "0"}}, steps: []any{
			submit{0, spec("x"), api.SubmitResult{JobID: 1}},
			purgeAt(1000 * time.Hour),
			submit{1000 * time.Hour, spec("x"), api.SubmitResult{JobID: 1, Duplicate: true}},
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newReplica()
			index := uint64(0)
			next := func(ct CommandType, p any) any { index++; return f.Apply(entry(t, index, ct, p)) }
			if c.config != nil {
				next(CmdSetConfig, &SetConfig{Settings: c.config})
			}
			for i, st := range c.steps {
				switch st := st.(type) {
				case submit:
					var first uint64
					f.Read(func(s *State) { first = s.NextJobID })
					res := next(CmdSubmitJobs, &SubmitJobs{Now: t0.Add(st.at), FirstID: first, Jobs: []JobSpec{st.spec}}).(*SubmitResult)
					if res.Results[0] != st.want {
						t.Fatalf("step %d: %s submits %q: got %+v, want %+v", i, st.spec.User, st.spec.RequestID, res.Results[0], st.want)
					}
				case *CancelJobs:
					next(CmdCancelJobs, st)
				case *PurgeJobs:
					next(CmdPurgeJobs, st)
				}
			}
			g := restoredCopy(t, f)
			if f.Hash() != g.Hash() {
				t.Fatal("request ids differ after a snapshot round trip")
			}
		})
	}
}

func cancelAt(at time.Duration, ids ...uint64) *CancelJobs {
	return &CancelJobs{Now: t0.Add(at), IDs: ids}
}

func purgeAt(at time.Duration) *PurgeJobs { return &PurgeJobs{Now: t0.Add(at)} }

// TestFormat1SnapshotRequests reads request records written before request
// ids were scoped: each takes its user and time from its job.
func TestFormat1SnapshotRequests(t *testing.T) {
	job := func(id uint64, user string, at time.Time) string {
		return fmt.Sprintf(`{"job":{"id":%d,"spec":{"user":%q,"script":"true","request_id":"k%d"},"state":"PENDING","submit_time":%q,"cpus":1}}`,
			id, user, id, at.Format(time.RFC3339Nano))
	}
	snap := strings.Join([]string{
		`{"format":1,"index":7,"next_job_id":3}`,
		job(1, "alice", t0), job(2, "bob", t0.Add(time.Hour)),
		`{"request":{"key":"k1","job":1}}`, `{"request":{"key":"k2","job":2}}`,
		`{"policy":{"config":{"weights":{"age":1000},"fairshare":"fairtree"},"qos":[]}}`,
	}, "\n") + "\n"
	s, err := ReadSnapshot(bytes.NewBufferString(snap))
	if err != nil {
		t.Fatal(err)
	}
	lookups := map[string]struct {
		user, id string
		job      uint64
		ok       bool
	}{
		"alice's id":        {"alice", "k1", 1, true},
		"bob's id":          {"bob", "k2", 2, true},
		"alice's, for bob":  {"bob", "k1", 0, false},
		"bob's, for alice":  {"alice", "k2", 0, false},
		"an id nobody used": {"alice", "k3", 0, false},
	}
	for name, l := range lookups {
		if job, ok := s.Requests.Lookup(l.user, l.id); job != l.job || ok != l.ok {
			t.Errorf("%s: got job %d, %v; want %d, %v", name, job, ok, l.job, l.ok)
		}
	}
	if g := s.Requests.gens; len(g) != 1 || !g[0].first.Equal(t0) || !g[0].last.Equal(t0.Add(time.Hour)) {
		t.Fatalf("format-1 request ids: want one generation spanning their jobs' submit times")
	}
	if s.Config.MinJobAge != 300 || s.Config.RequestIDRetention != 86400 {
		t.Errorf("a configuration without the retention settings read as MinJobAge=%d RequestIDRetention=%d, want the defaults 300 and 86400",
			s.Config.MinJobAge, s.Config.RequestIDRetention)
	}
	// Kept until the newer of the two is older than the window.
	if n := s.Requests.expire(t0.Add(24*time.Hour+time.Minute), 86400); n != 0 {
		t.Errorf("%d ids forgotten before the newest of them was a day old", n)
	}
	if n := s.Requests.expire(t0.Add(25*time.Hour+time.Minute), 86400); n != 2 {
		t.Errorf("%d ids forgotten a day after the newest, want 2", n)
	}
}

func TestInternedStringsShrinkAfterPurge(t *testing.T) {
	f := newReplica()
	const n = 3000
	var specs []JobSpec
	for i := 0; i < n; i++ {
		s := spec(fmt.Sprint("unique-name-", i))
		s.Output = fmt.Sprintf("/home/alice/out-%d", i)
		s.InlineEnv = &InlineEnv{Env: []string{"A=1", fmt.Sprint("I=", i)}}
		specs = append(specs, s)
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	f.Apply(entry(t, 1, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: specs}))
	f.Apply(entry(t, 2, CmdCancelJobs, &CancelJobs{Now: t0, IDs: ids[:n-1]}))
	f.Read(func(s *State) {
		if len(s.interned) < 2*n || envBlobs(s) != n {
			t.Fatalf("before the purge: %d interned strings and %d environments, want at least %d and %d", len(s.interned), envBlobs(s), 2*n, n)
		}
	})
	f.Apply(entry(t, 3, CmdPurgeJobs, &PurgeJobs{Now: tPurgeAt}))
	f.Read(func(s *State) {
		if len(s.Jobs) != 1 || len(s.interned) > 6 || envBlobs(s) != 1 || len(s.blobs) > 4 {
			t.Fatalf("after purging all but one job: %d jobs, %d interned strings, %d environments, %d blobs; want 1, at most 6, 1, at most 4 (a script, an environment, its chunks)",
				len(s.Jobs), len(s.interned), envBlobs(s), len(s.blobs))
		}
	})
	// A new job still shares the remaining job's strings.
	last := spec(fmt.Sprint("unique-name-", n-1))
	last.RequestID = "another"
	f.Apply(entry(t, 4, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: n + 1, Jobs: []JobSpec{last}}))
	f.Read(func(s *State) {
		a, b := s.Jobs[n].Spec.Name, s.Jobs[n+1].Spec.Name
		if unsafe.StringData(a) != unsafe.StringData(b) {
			t.Error("a job submitted after the rebuild does not share its name with the job that kept it")
		}
	})
}

// envBlobs counts the environments the state holds.
func envBlobs(s *State) int {
	n := 0
	for k := range s.blobs {
		if k.env {
			n++
		}
	}
	return n
}

// TestEndKey checks the order key of end times against the calendar
// bounds it stands for, on both sides of the range that needs no
// calendar and in zones far from UTC.
func TestEndKey(t *testing.T) {
	far := time.FixedZone("far", 14*3600)
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{time.Time{}, math.MinInt64},
		{time.Date(1699, 12, 31, 23, 0, 0, 0, time.UTC), math.MinInt64},
		{time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()},
		{time.Unix(unix1750, 0), time.Unix(unix1750, 0).UnixNano()},
		{time.Unix(unix1750+1, 0).In(far), time.Unix(unix1750+1, 0).UnixNano()},
		{t0, t0.UnixNano()},
		{time.Unix(unix2150-1, 5).In(far), time.Unix(unix2150-1, 5).UnixNano()},
		{time.Unix(unix2150, 0), time.Unix(unix2150, 0).UnixNano()},
		{time.Date(2200, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(2200, 12, 31, 23, 0, 0, 0, time.UTC).UnixNano()},
		{time.Date(2201, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Date(2200, 12, 31, 23, 0, 0, 0, time.UTC).In(far), math.MaxInt64}, // 2201 there
	} {
		if got := endKey(tc.t); got != tc.want {
			t.Errorf("endKey(%v) = %d, want %d", tc.t, got, tc.want)
		}
	}
}
