package accounting

import (
	"strings"
	"testing"
	"time"
)

// FuzzRunIndexEntry reads arbitrary bytes as run index entries and node
// facts, as a damaged store would hold them: nothing may panic, and an
// entry the store writes reads back as written.
func FuzzRunIndexEntry(f *testing.F) {
	r := Run{Job: 7, Account: "physics", User: "ada", Eligible: t0, Start: t0.Add(time.Minute), End: t0.Add(time.Hour),
		CPUs: 4, GPUs: 1, CPUSeconds: 14160, GPUSeconds: 3540, Billing: 1.5, First: true}
	f.Add(primaryKey(r.End, Key{7, 1}), runValue(&r), "physics", "ada", int64(60), uint32(4))
	f.Add([]byte{}, []byte{}, "", "", int64(0), uint32(0))
	f.Add(make([]byte, 24), make([]byte, runFixed), "a\x00b", "u", int64(-5), uint32(1<<31))
	f.Fuzz(func(t *testing.T, k, v []byte, account, user string, wait int64, cpus uint32) {
		var got Run
		_ = runFrom(k, v, &got, map[string]string{})
		_, _ = nodeFactFrom(k, v)
		if strings.IndexByte(account, 0) >= 0 {
			return // names hold no NUL: the controller refuses them
		}
		in := Run{Job: 9, Account: account, User: user, Eligible: t0, Start: t0.Add(time.Duration(wait) * time.Second),
			End: t0.Add(48 * time.Hour), CPUs: int(cpus & 0x7fffffff), First: wait%2 == 0}
		pk := primaryKey(in.End, Key{9, 1})
		if err := runFrom(pk, runValue(&in), &got, map[string]string{}); err != nil {
			t.Fatalf("%+v: %v", in, err)
		}
		if got.Account != in.Account || got.User != in.User || !got.Start.Equal(in.Start) && in.Start.Year() > 1700 ||
			got.CPUs != in.CPUs || got.First != in.First || got.Job != 9 || !got.End.Equal(in.End) {
			t.Fatalf("wrote %+v, read %+v", in, got)
		}
	})
}
