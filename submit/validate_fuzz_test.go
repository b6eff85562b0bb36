package submit

import (
	"encoding/json"
	"testing"

	"corral/api"
)

// FuzzValidateSpec decodes arbitrary JSON into a JobSpec, as the
// controller does with a request body, and checks that ValidateSpec never
// panics and that what it accepts is safe to compute with: the derived
// CPUs, memory and array size are positive and within the documented
// bounds. The numbers after the body, when not zero, replace the spec's
// counts, memory, time limit, nice and one array range (a body that is not
// JSON stands for a valid spec), so that the fuzzer explores the numbers
// of specs that are otherwise valid.
func FuzzValidateSpec(f *testing.F) {
	good, _ := json.Marshal(goodSpec())
	f.Add(good, 0, 0, int64(0), int64(0), 0, 0, 0, 0)
	f.Add([]byte("x"), 1<<20, 1<<20, int64(1)<<40, int64(1)<<62, -1<<40, 0, 1<<40, 1)
	f.Add([]byte("x"), 1000, 1000, int64(1)<<20, int64(MaxTimeLimit), MaxNice, 5, 3, -1)
	f.Add([]byte(`{"user":"a","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":1,"gres":[{"name":"gpu","count":-5}]}`), 0, 0, int64(0), int64(0), 0, 0, 0, 0)
	f.Add([]byte(`{"user":"a","script":"#!/bin/sh\n","ntasks":4294967296,"cpus_per_task":4294967296}`), 0, 0, int64(0), int64(0), 0, 0, 0, 0)
	f.Add([]byte(`{"user":"a","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":1,"array":{"raw":"","ranges":[{"first":0,"last":1099511627776,"step":1},{"first":1,"last":2,"step":1}]}}`), 0, 0, int64(0), int64(0), 0, 0, 0, 0)
	f.Add([]byte(`{"user":"a","script":"#!/bin/sh\n","ntasks":2,"cpus_per_task":3,"mem_per_cpu_mb":1024,"time_limit_s":9223372036854775807,"nice":-9223372036854775808}`), 0, 0, int64(0), int64(0), 0, 0, 0, 0)
	f.Add([]byte(`{"user":"a","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":1,"dependency":{"clauses":[{"type":"after","job_ids":["1"],"minutes":5}]},"hugepages":[{"size_kb":2048,"count":4}]}`), 0, 0, int64(0), int64(0), 0, 0, 0, 0)
	f.Fuzz(func(t *testing.T, body []byte, ntasks, cpus int, memPerCPU, timeLimit int64, nice, first, last, step int) {
		var sp api.JobSpec
		if json.Unmarshal(body, &sp) != nil {
			sp = goodSpec()
		}
		setIf(&sp.NTasks, ntasks)
		setIf(&sp.CPUsPerTask, cpus)
		setIf(&sp.MemPerCPU, memPerCPU)
		setIf(&sp.TimeLimit, timeLimit)
		setIf(&sp.Nice, nice)
		if first != 0 || last != 0 || step != 0 {
			sp.Array = &api.ArraySpec{Ranges: []api.ArrayRange{{First: first, Last: last, Step: step}, {First: 0, Last: 3, Step: 1}}}
		}
		if ValidateSpec(&sp, validateNow) != nil {
			return
		}
		if c := sp.CPUs(); c < 1 || c > MaxCPUs {
			t.Fatalf("accepted a spec with %d CPUs", c)
		}
		if m := sp.MemMB(); m < 0 || m > MaxMemoryMiB {
			t.Fatalf("accepted a spec with %d MiB", m)
		}
		if sp.TimeLimit < 0 || sp.TimeLimit > MaxTimeLimit || sp.Nice < -MaxNice || sp.Nice > MaxNice {
			t.Fatalf("accepted time limit %d, nice %d", sp.TimeLimit, sp.Nice)
		}
		for _, g := range sp.Gres {
			if g.Count < 1 || g.Count > MaxGresCount {
				t.Fatalf("accepted gres %+v", g)
			}
		}
		if a := sp.Array; a != nil {
			set := api.NewIndexSet(a.Ranges)
			if n := set.Len(); n < 1 || n > MaxArrayIndex+1 || set.Min() < 0 || set.Max() > MaxArrayIndex {
				t.Fatalf("accepted an array of %d tasks, %d..%d", n, set.Min(), set.Max())
			}
		}
	})
}

func setIf[T int | int64](dst *T, v T) {
	if v != 0 {
		*dst = v
	}
}
