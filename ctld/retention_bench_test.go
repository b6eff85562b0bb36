package ctld

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"corral/ctld/state"
)

// BenchmarkPurge measures the apply side of retention on one FSM: 200,000
// pending jobs (as BenchmarkMemoryPerPendingJob makes them) are cancelled,
// then PurgeJobs entries of at most state.DefaultPurgeMax (5,000) jobs apply
// until none is left. It reports the mean and the longest apply (the time
// the state's lock is held, in wall and in this thread's CPU time), the live
// heap and the snapshot's size before and after.
//
// In "shared" the jobs share their strings, as jobs of one user mostly do; in
// "unique" each has its own name and output path, so the interned strings
// are rebuilt along the way (twice as many purged as remain).
func BenchmarkPurge(b *testing.B) {
	for _, unique := range []bool{false, true} {
		name := map[bool]string{false: "shared", true: "unique"}[unique]
		b.Run(name, func(b *testing.B) { benchmarkPurge(b, unique) })
	}
}

func benchmarkPurge(b *testing.B, unique bool) {
	const n = 200_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f := NewFSM(quietLog())
		if unique {
			fillUnique(f, n)
		} else {
			fillPending(f, n)
		}
		ids := make([]uint64, n)
		for k := range ids {
			ids[k] = uint64(k + 1)
		}
		index := uint64(1000)
		apply := func(ct state.CommandType, p any) any {
			index++
			data, err := state.Encode(ct, p)
			if err != nil {
				b.Fatal(err)
			}
			return f.Apply(rlog(index, data))
		}
		apply(state.CmdCancelJobs, &state.CancelJobs{Now: t0, IDs: ids})
		heapBefore, snapBefore := liveHeap(), snapshotSize(b, f)
		b.StartTimer()
		var entries int
		var longest, total, cpuLongest, cpuTotal time.Duration
		// The apply's own CPU time, read for this thread, is what a loaded
		// machine changes least.
		runtime.LockOSThread()
		for {
			start, cpuStart := time.Now(), threadCPU()
			res := apply(state.CmdPurgeJobs, &state.PurgeJobs{Now: t0.Add(time.Hour), Max: state.DefaultPurgeMax}).(*state.PurgeResult)
			d, cpu := time.Since(start), threadCPU()-cpuStart
			entries++
			total, cpuTotal = total+d, cpuTotal+cpu
			longest, cpuLongest = max(longest, d), max(cpuLongest, cpu)
			if !res.More {
				break
			}
		}
		runtime.UnlockOSThread()
		b.StopTimer()
		f.Read(func(s *state.State) {
			if len(s.Jobs) != 0 {
				b.Fatalf("%d jobs left after the purge", len(s.Jobs))
			}
		})
		b.ReportMetric(float64(entries), "entries")
		b.ReportMetric(float64(total.Microseconds())/1000/float64(entries), "ms/entry")
		b.ReportMetric(float64(longest.Microseconds())/1000, "max-ms/entry")
		b.ReportMetric(float64(cpuTotal.Microseconds())/1000/float64(entries), "cpu-ms/entry")
		b.ReportMetric(float64(cpuLongest.Microseconds())/1000, "max-cpu-ms/entry")
		b.ReportMetric(heapBefore/1e6, "heap-MB-before")
		b.ReportMetric(liveHeap()/1e6, "heap-MB-after")
		b.ReportMetric(snapBefore/1e6, "snap-MB-before")
		b.ReportMetric(snapshotSize(b, f)/1e3, "snap-KB-after")
		b.ReportMetric(snapshotSize(b, NewFSM(quietLog()))/1e3, "snap-KB-empty")
		runtime.KeepAlive(f)
		b.StartTimer()
	}
}

// threadCPU returns the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// liveHeap returns the bytes of live heap, after collecting twice (the
// second empties sync.Pool's victim cache).
func liveHeap() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

// snapshotSize returns the bytes a snapshot of f writes.
func snapshotSize(b *testing.B, f *FSM) float64 {
	snap, err := f.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	var w countingWriter
	if err := snap.(*fsmSnapshot).snap.Write(&w); err != nil {
		b.Fatal(err)
	}
	return float64(w)
}

type countingWriter int64

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

// fillUnique is fillPending with a name and an output path of each job's
// own.
func fillUnique(f *FSM, n int) {
	index := uint64(0)
	fillUniqueWith(func(data []byte) { index++; f.Apply(rlog(index, data)) }, n)
}

func fillPendingWith(apply func([]byte), n int) {
	const chunk = 10_000
	for first := 0; first < n; first += chunk {
		cmd := &state.SubmitJobs{Now: t0, FirstID: uint64(first + 1)}
		for k := 0; k < chunk && first+k < n; k++ {
			s := state.JobSpec{Name: "sim", User: "alice", InlineScript: &state.InlineScript{Script: "#!/bin/sh\ntrue\n"}, NTasks: 1, CPUsPerTask: 1,
				SubmitDir: "/home/alice", WorkDir: "/home/alice", Partition: "batch",
				RequestID: fmt.Sprintf("%032x", first+k)}
			cmd.Jobs = append(cmd.Jobs, s)
		}
		data, _ := state.Encode(state.CmdSubmitJobs, cmd)
		apply(data)
	}
}

func fillUniqueWith(apply func([]byte), n int) {
	const chunk = 10_000
	for first := 0; first < n; first += chunk {
		cmd := &state.SubmitJobs{Now: t0, FirstID: uint64(first + 1)}
		for k := 0; k < chunk && first+k < n; k++ {
			s := state.JobSpec{Name: fmt.Sprint("sim-", first+k), User: "alice", InlineScript: &state.InlineScript{Script: "#!/bin/sh\ntrue\n"}, NTasks: 1, CPUsPerTask: 1,
				SubmitDir: "/home/alice", WorkDir: "/home/alice", Partition: "batch", Output: fmt.Sprintf("/home/alice/out/%d.log", first+k),
				RequestID: fmt.Sprintf("%032x", first+k)}
			cmd.Jobs = append(cmd.Jobs, s)
		}
		data, _ := state.Encode(state.CmdSubmitJobs, cmd)
		apply(data)
	}
}

// BenchmarkApplySubmit measures applying SubmitJobs entries of 10,000 jobs
// each (decoding included, encoding not): the FSM's share of a submission,
// which the retention indexes must not slow down.
func BenchmarkApplySubmit(b *testing.B) {
	for _, unique := range []bool{false, true} {
		name := map[bool]string{false: "shared", true: "unique"}[unique]
		b.Run(name, func(b *testing.B) {
			const n = 100_000
			capture := &captureFSM{}
			if unique {
				fillUniqueWith(capture.keep, n)
			} else {
				fillPendingWith(capture.keep, n)
			}
			entries := capture.data
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				f := NewFSM(quietLog())
				runtime.GC()
				b.StartTimer()
				for k, data := range entries {
					f.Apply(rlog(uint64(k+1), data))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/job")
		})
	}
}

type captureFSM struct{ data [][]byte }

func (c *captureFSM) keep(data []byte) { c.data = append(c.data, data) }
