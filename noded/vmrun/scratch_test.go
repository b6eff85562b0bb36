package vmrun

import (
	"context"
	"os"
	"testing"
	"time"

	"corral/internal/procref"
)

func TestScratchLoadCPU(t *testing.T) {
	r, _ := warmRunner(t)
	h, err := r.Start(context.Background(), jobSpec(t, "#!/bin/bash\necho hi\n", 1, 256))
	if err != nil {
		t.Fatal(err)
	}
	h.Wait()
	s := waitSnapshots(t, r, 1)[0]
	for i := 0; i < 1; i++ {
		spec := jobSpec(t, "#!/bin/bash\necho hi\n", 1, 256)
		f, _ := os.Open(r.warm.statePath(s.Key))
		keys, _ := newHandleKeys()
		keys.root = r.warm.snaps[s.Key].RootHandleKey
		t0 := time.Now()
		v, err := r.start(context.Background(), spec, startOpts{accel: r.Accel(), hostRoot: true, group: true, agent: true, keys: &keys, incoming: &Incoming{File: f}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := v.waitIncoming(context.Background())
		loaded := time.Since(t0)
		ps, _ := procref.ReadStat(v.st.PID)
		cpuLoaded := time.Duration(ps.CPUTicks) * 10 * time.Millisecond
		v.Continue()
		err = v.sendJob(context.Background(), jobPayload(spec, r.guestFS(spec)))
		jobIn := time.Since(t0)
		ps2, _ := procref.ReadStat(v.st.PID)
		waitFor(t, "out", time.Minute, func() bool { fi, err := os.Stat(spec.Stdout); return err == nil && fi.Size() > 0 })
		first := time.Since(t0)
		ps3, _ := procref.ReadStat(v.st.PID)
		t.Logf("state %s %v: loaded %v (qemu cpu %v), job in %v (cpu %v), first output %v (cpu %v)", st, err, loaded, cpuLoaded, jobIn,
			time.Duration(ps2.CPUTicks)*10*time.Millisecond, first, time.Duration(ps3.CPUTicks)*10*time.Millisecond)
		v.Wait()
		t.Logf("console: %s", tailFile(v.f.console, 30, 5000))
		f.Close()
	}
}
