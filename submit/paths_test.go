package submit

import (
	"testing"

	"corral/api"
)

func testJob() *api.Job {
	return &api.Job{ID: 42, Spec: api.JobSpec{Name: "train", User: "alice", WorkDir: "/home/alice/run"}}
}

func TestExpandPath(t *testing.T) {
	tests := map[string]struct {
		pattern string
		want    string
	}{
		"default":             {"", "/home/alice/run/slurm-42.out"},
		"job id":              {"out-%j.txt", "/home/alice/run/out-42.txt"},
		"job name":            {"%x.log", "/home/alice/run/train.log"},
		"user":                {"/scratch/%u/o", "/scratch/alice/o"},
		"node":                {"%N-%j", "/home/alice/run/node07-42"},
		"array job id":        {"%A.out", "/home/alice/run/42.out"},
		"array task id":       {"%A_%a.out", "/home/alice/run/42_4294967294.out"},
		"percent":             {"100%%.out", "/home/alice/run/100%.out"},
		"padded job id":       {"%6j.out", "/home/alice/run/000042.out"},
		"padding too narrow":  {"%1j", "/home/alice/run/42"},
		"padding capped":      {"%20j", "/home/alice/run/0000000042"},
		"padding ignored":     {"%5x", "/home/alice/run/train"},
		"unknown kept":        {"%q-%j", "/home/alice/run/%q-42"},
		"unknown padded kept": {"%3q", "/home/alice/run/%3q"},
		"trailing percent":    {"out%", "/home/alice/run/out%"},
		"trailing width":      {"out%12", "/home/alice/run/out%12"},
		"padded percent kept": {"%2%", "/home/alice/run/%2%"},
		"absolute":            {"/var/log/%j", "/var/log/42"},
		"relative cleaned":    {"../logs/./%j", "/home/alice/logs/42"},
		"backslash disables":  {`out\%j`, "/home/alice/run/out%j"},
		"all at once":         {"/o/%u/%x_%j_%N_%A_%a_%%", "/o/alice/train_42_node07_42_4294967294_%"},
		"dev null":            {"/dev/null", "/dev/null"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ExpandPath(tc.pattern, testJob(), "node07"); got != tc.want {
				t.Errorf("ExpandPath(%q) = %q, want %q", tc.pattern, got, tc.want)
			}
		})
	}
}

func TestExpandArrayTask(t *testing.T) {
	v := PathVars{JobID: 57, ArrayJobID: 50, ArrayTaskID: 7, Name: "sweep", WorkDir: "/w"}
	tests := map[string]struct {
		pattern, want string
	}{
		"array default name": {"slurm-%A_%a.out", "/w/slurm-50_7.out"},
		"job id of the task": {"%j", "/w/57"},
		"padded task":        {"%3a", "/w/007"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := v.Expand(tc.pattern); got != tc.want {
				t.Errorf("Expand(%q) = %q, want %q", tc.pattern, got, tc.want)
			}
		})
	}
}

func TestExpandWithoutWorkDirStaysRelative(t *testing.T) {
	if got := (PathVars{JobID: 1, ArrayTaskID: -1}).Expand("o-%j"); got != "o-1" {
		t.Errorf("Expand = %q, want o-1", got)
	}
}

func TestOutputPaths(t *testing.T) {
	tests := map[string]struct {
		output, error      string
		wantOut, wantError string
	}{
		"both default to one file": {"", "", "/home/alice/run/slurm-42.out", "/home/alice/run/slurm-42.out"},
		"error follows output":     {"%x-%j.log", "", "/home/alice/run/train-42.log", "/home/alice/run/train-42.log"},
		"separate error":           {"%j.out", "%j.err", "/home/alice/run/42.out", "/home/alice/run/42.err"},
		"error only":               {"", "/tmp/%u.err", "/home/alice/run/slurm-42.out", "/tmp/alice.err"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job := testJob()
			job.Spec.Output, job.Spec.Error = tc.output, tc.error
			out, errPath := OutputPaths(job, "node07")
			if out != tc.wantOut || errPath != tc.wantError {
				t.Errorf("OutputPaths = %q, %q; want %q, %q", out, errPath, tc.wantOut, tc.wantError)
			}
		})
	}
}
