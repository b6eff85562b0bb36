package display

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"corral/api"
)

// arrayJob is array 30's record of pending tasks 3, 5 and 6 (of 0-9%2).
func arrayJob() api.Job {
	j := pendingJob()
	j.ID, j.ArrayJobID, j.Spec.Name = 30, 30, "sweep"
	j.Spec.Array = &api.ArraySpec{Raw: "0-9%2", Ranges: []api.ArrayRange{{First: 0, Last: 9, Step: 1}}, Throttle: 2}
	j.ArrayPending = &api.IndexSet{Ranges: []api.ArrayRange{{First: 3, Last: 3, Step: 1}, {First: 5, Last: 6, Step: 1}}}
	return j
}

// TestQueueLongFormat compares squeue -O layouts with what squeue prints:
// each field 20 columns when no width is given, left-justified unless ".",
// no separator but the suffix.
func TestQueueLongFormat(t *testing.T) {
	jobs := []api.Job{runningJob(), pendingJob(), finishedJob()}
	tests := map[string]struct {
		fields string
		want   string
	}{
		"default width 20": {"jobid,username,statecompact", "" +
			"JOBID               USER                ST                  \n" +
			"42                  alice               R                   \n" +
			"12                  bob                 PD                  \n" +
			"7                   carol               F                   \n"},
		"widths, justification, suffix": {"jobid:.6,name:6|,partition:.9 ,timeused:.10", "" +
			" JOBIDNAME  |PARTITION       TIME\n" +
			"    42train.|      gpu    1:02:03\n" +
			"    12sim   |    batch       0:00\n" +
			"     7build |    batch       0:30\n"},
		"width 0 prints as is": {"state:,reasonlist:", "" +
			"STATENODELIST(REASON)\n" +
			"RUNNINGgpu01\n" +
			"PENDING(Priority)\n" +
			"FAILED(NonZeroExitCode)\n"},
		"the brief's names": {"arrayjobid:5,arraytaskid:5,account:8,qos:5,timelimit:.9,timeleft:.9,numcpus:.4,numnodes:.3,nodelist:6,minmemory:.6,exit_code:5", "" +
			"ARRAYARRAYACCOUNT QOS  TIME_LIMITIME_LEFTCPUSNODNODELIMIN_MEEXIT_\n" +
			"42   N/A  physics high   2:00:00    57:57   4  1gpu01  1.50G0:0  \n" +
			"12   N/A  (null)  (nullUNLIMITEDUNLIMITED   1  1           00:0  \n" +
			"7    N/A  eng     (null    10:00     9:30   1  1n3      500M3:0  \n"},
		"tres": {"jobid:4,tres-alloc:40,tres-per-node:16", "" +
			"JOBITRES_ALLOC                              TRES_PER_NODE   \n" +
			"42  cpu=4,mem=1536M,node=1,billing=4,gres/gpgres/gpu:a100:2 \n" +
			"12  (null)                                  N/A             \n" +
			"7   cpu=1,mem=500M,node=1,billing=1         N/A             \n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := render(t, jobs, QueueOptions{LongFormat: tc.fields}); got != tc.want {
				t.Errorf("-O %q:\ngot\n%s\nwant\n%s", tc.fields, got, tc.want)
			}
		})
	}
}

func TestParseQueueLongFormat(t *testing.T) {
	tests := map[string]struct {
		spec string
		cols int
		err  string
	}{
		"every documented name": {"jobid,arrayjobid,arraytaskid,name,username,account,partition,qos,state,statecompact," +
			"timeused,timelimit,timeleft,numcpus,numnodes,nodelist,reasonlist,priority,submittime,starttime,endtime," +
			"workdir,command,minmemory,tres-alloc,gres,tres-per-node", 27, ""},
		"any case": {"JobID,UserName:.8", 2, ""},
		"suffix":   {"jobid:5 | ", 2, ""},
		"unknown":  {"jobid,bogus", 0, "Invalid job format specification: bogus"},
		"empty":    {",", 0, "names no field"},
		"too wide": {"jobid:99999", 0, "wider than 4096"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := ParseQueueLongFormat(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one holding %q", err, tc.err)
				}
				return
			}
			if err != nil || len(f.cols) != tc.cols {
				t.Fatalf("ParseQueueLongFormat(%q): %v, err %v; want %d columns", tc.spec, f, err, tc.cols)
			}
		})
	}
}

// TestQueueArray checks -r: an array's pending tasks each on a line of
// their own, as task 30_5 of the array.
func TestQueueArray(t *testing.T) {
	jobs := []api.Job{arrayJob(), runningJob()}
	format := "%.8i %.6A %.4K %j %t"
	folded := "" +
		"   JOBID  JOBID ARRA NAME ST\n" +
		"30_[3,5-     30 [3,5 sweep PD\n" +
		"      42     42  N/A train.sh R\n"
	if got := render(t, jobs, QueueOptions{Format: format}); got != folded {
		t.Errorf("without -r:\ngot\n%s\nwant\n%s", got, folded)
	}
	expanded := "" +
		"   JOBID  JOBID ARRA NAME ST\n" +
		"    30_3     30    3 sweep PD\n" +
		"    30_5     30    5 sweep PD\n" +
		"    30_6     30    6 sweep PD\n" +
		"      42     42  N/A train.sh R\n"
	if got := render(t, jobs, QueueOptions{Format: format, Array: true}); got != expanded {
		t.Errorf("with -r:\ngot\n%s\nwant\n%s", got, expanded)
	}
}

func TestQueueSort(t *testing.T) {
	mk := func(id uint64, part, user string, st api.JobState, prio int64) api.Job {
		return api.Job{ID: id, State: st, Priority: prio, Spec: api.JobSpec{Partition: part, User: user, Name: "j"}}
	}
	jobs := []api.Job{
		mk(1, "gpu", "bob", api.StateRunning, 10), mk(2, "batch", "alice", api.StatePending, 5),
		mk(3, "batch", "carol", api.StateRunning, 50), mk(4, "batch", "alice", api.StatePending, 90),
		mk(5, "", "bob", api.StateCompleting, 1),
	}
	tests := map[string]struct {
		spec string
		want string
		err  string
	}{
		"default P,t,-p": {"", "5 4 2 3 1", ""},
		"by id":          {"i", "1 2 3 4 5", ""},
		"descending id":  {"-i", "5 4 3 2 1", ""},
		"user then -p":   {"u,-p", "4 2 1 5 3", ""},
		"long names":     {"+UserName,-Priority", "4 2 1 5 3", ""},
		"state long":     {"T,i", "5 2 4 1 3", ""},
		"unknown key":    {"P,x9", "", "Invalid sort specification: x9"},
		"no key":         {",", "", "names no key"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := ParseQueueSort(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one holding %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			refs := make([]*api.Job, len(jobs))
			for i := range jobs {
				refs[i] = &jobs[i]
			}
			sortRefs(refs, s)
			var ids []string
			for _, j := range refs {
				ids = append(ids, strconv.FormatUint(j.ID, 10))
			}
			if got := strings.Join(ids, " "); got != tc.want {
				t.Errorf("-S %q orders %s, want %s", tc.spec, got, tc.want)
			}
		})
	}
}

func sortRefs(refs []*api.Job, s *QueueSort) {
	for i := 1; i < len(refs); i++ {
		for k := i; k > 0 && s.Compare(refs[k-1], refs[k], t0) > 0; k-- {
			refs[k-1], refs[k] = refs[k], refs[k-1]
		}
	}
}

// FuzzQueueLongFormat checks squeue's -O parser and that any accepted
// list renders a job.
func FuzzQueueLongFormat(f *testing.F) {
	for _, s := range []string{"jobid,name:20,state", "jobid:.6|", "reasonlist:", ",", "jobid:99999999999", "bogus"} {
		f.Add(s)
	}
	j := arrayJob()
	f.Fuzz(func(t *testing.T, spec string) {
		if _, err := ParseQueueLongFormat(spec); err != nil {
			return
		}
		var b bytes.Buffer
		if err := QueueRefs(&b, []*api.Job{&j}, QueueOptions{LongFormat: spec, Array: true}, t0); err != nil {
			t.Fatalf("-O %q parsed but does not render: %v", spec, err)
		}
	})
}

// FuzzQueueSort checks squeue's -S parser and that any accepted list
// orders jobs without panicking.
func FuzzQueueSort(f *testing.F) {
	for _, s := range []string{"", "P,t,-p", "-i", "+UserName,-Priority", "x", ",,-", "+"} {
		f.Add(s)
	}
	jobs := []api.Job{runningJob(), pendingJob(), finishedJob(), arrayJob()}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseQueueSort(spec)
		if err != nil {
			return
		}
		for i := range jobs {
			for k := range jobs {
				if s.Compare(&jobs[i], &jobs[k], t0) != -s.Compare(&jobs[k], &jobs[i], t0) {
					t.Fatalf("-S %q: Compare is not antisymmetric for jobs %d and %d", spec, jobs[i].ID, jobs[k].ID)
				}
			}
		}
	})
}
