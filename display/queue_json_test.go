package display

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"corral/api"
)

func TestQueueJSON(t *testing.T) {
	tests := map[string]struct {
		jobs []api.Job
		want string
	}{
		"no jobs": {nil, "{\"jobs\":[]}\n"},
		"pending job": {
			[]api.Job{pendingJob()},
			`{"jobs":[` + "\n" +
				`{"job_id":12,"name":"sim","user_name":"bob","account":"","partition":"batch","qos":"",` +
				`"job_state":"PENDING","job_state_short":"PD","state_reason":"Priority","priority":100,"nice":0,` +
				`"submit_time":"2024-03-01T09:59:00Z","time_limit_s":0,"nodes":"","node_count":1,"cpus":1,` +
				`"tasks":1,"cpus_per_task":1,"memory_mb":0,"exit_code":0,"signal":0,"restarts":0,` +
				`"command":"/home/bob/sim","work_dir":"/home/bob","standard_output":"/home/bob/slurm-12.out",` +
				`"standard_error":"/home/bob/slurm-12.out"}` + "\n]}\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := QueueJSON(&b, tc.jobs); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestQueueJSONDecodes(t *testing.T) {
	jobs := []api.Job{runningJob(), pendingJob(), finishedJob()}
	var b strings.Builder
	if err := QueueJSON(&b, jobs); err != nil {
		t.Fatal(err)
	}
	var doc JSONQueue
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, b.String())
	}
	if len(doc.Jobs) != 3 {
		t.Fatalf("%d jobs decoded, want 3", len(doc.Jobs))
	}
	tests := map[string]struct{ got, want any }{
		"running id":         {doc.Jobs[0].JobID, uint64(42)},
		"running state":      {doc.Jobs[0].State, "RUNNING"},
		"running node":       {doc.Jobs[0].Nodes, "gpu01"},
		"running start":      {doc.Jobs[0].StartTime, "2024-03-01T08:57:57Z"},
		"running gres":       {doc.Jobs[0].Gres, "gres/gpu:a100:2"},
		"running dependency": {doc.Jobs[0].Dependency, "afterok:41"},
		"running array":      {doc.Jobs[0].Array, "0-3"},
		"running stdout":     {doc.Jobs[0].StdOut, "/home/alice/run/out-42.txt"},
		"running limit":      {doc.Jobs[0].TimeLimitS, int64(7200)},
		"running cpus":       {doc.Jobs[0].CPUs, 4},
		"pending reason":     {doc.Jobs[1].Reason, "Priority"},
		"pending no start":   {doc.Jobs[1].StartTime, ""},
		"failed exit code":   {doc.Jobs[2].ExitCode, 3},
		"failed reason":      {doc.Jobs[2].Reason, "NonZeroExitCode"},
		"failed end":         {doc.Jobs[2].EndTime, "2024-03-01T09:00:30Z"},
		"failed stderr":      {doc.Jobs[2].StdErr, "/src/err.log"},
		"failed message":     {doc.Jobs[2].Message, "script exited with status 3"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
	if strings.Contains(b.String(), "echo hi") {
		t.Error("the JSON carries the job script")
	}
}

func TestQueueJSONWriteError(t *testing.T) {
	if err := QueueJSON(failingWriter{}, []api.Job{pendingJob()}); !errors.Is(err, errWrite) {
		t.Errorf("QueueJSON to a failing writer = %v, want %v", err, errWrite)
	}
}
