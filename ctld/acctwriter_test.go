package ctld

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"corral/accounting"
	"corral/api"
	"corral/ctld/state"
)

// acctFSM is an FSM writing to its own store in a new directory.
func acctFSM(t *testing.T) (*FSM, *acctWriter) {
	t.Helper()
	f := NewFSM(quietLog())
	w, err := openAccounting(t.TempDir(), f, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.closeStore)
	return f, w
}

func summary(t *testing.T, w *acctWriter) accounting.Summary {
	t.Helper()
	w.flush()
	s, err := w.store.Summary()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// snapshotOf persists f's snapshot as Raft would.
func snapshotOf(t *testing.T, f *FSM) *memSink {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink
}

// TestAccountingAcrossSnapshots: a member restored from a snapshot writes
// the records of the finished jobs the snapshot holds, so its store then
// equals that of a member that applied the log; a purge writes the records
// of the jobs it removes where they are missing, changing nothing where
// they exist; and a member restored from a snapshot taken after a purge
// lacks the purged jobs' records, which its summary shows.
func TestAccountingAcrossSnapshots(t *testing.T) {
	a, wa := acctFSM(t)
	var held []api.JobSpec
	for _, name := range []string{"h1", "h2", "h3"} {
		sp := spec(name)
		sp.Hold = true
		held = append(held, sp)
	}
	applyAll(t, a, []*raft.Log{
		entry(t, 1, state.CmdSubmitJobs, &state.SubmitJobs{Now: t0, FirstID: 1, Jobs: stateSpecs(held...)}),
		entry(t, 2, state.CmdCancelJobs, &state.CancelJobs{Now: t0.Add(time.Minute), IDs: []uint64{1, 2}}),
	})
	before := snapshotOf(t, a)
	if s := summary(t, wa); s.Records != 2 {
		t.Fatalf("after two cancels the store holds %d records, want 2", s.Records)
	}
	purge := entry(t, 3, state.CmdPurgeJobs, &state.PurgeJobs{Now: t0.Add(time.Hour)})
	a.Apply(purge)
	var left int
	a.Read(func(s *state.State) { left = len(s.Jobs) })
	if left != 1 {
		t.Fatalf("the purge left %d jobs, want 1", left)
	}
	want := summary(t, wa)
	if want.Records != 2 {
		t.Fatalf("after the purge the store holds %d records, want 2", want.Records)
	}
	after := snapshotOf(t, a)

	b, wb := acctFSM(t)
	if err := b.Restore(io.NopCloser(&before.Buffer)); err != nil {
		t.Fatal(err)
	}
	if got := summary(t, wb); got != want {
		t.Errorf("restored from the snapshot before the purge: %+v, want %+v", got, want)
	}
	b.Apply(purge)
	if got := summary(t, wb); got != want {
		t.Errorf("after the purge on the restored member: %+v, want %+v", got, want)
	}

	c, wc := acctFSM(t)
	if err := c.Restore(io.NopCloser(&after.Buffer)); err != nil {
		t.Fatal(err)
	}
	if got := summary(t, wc); got.Records != 0 || got == want {
		t.Errorf("restored from the snapshot after the purge: %+v; want no record, and a summary that differs", got)
	}
}

// TestAccountingRetention: with AccountingRetention set, the purge entry
// deletes the records of jobs that ended longer ago, on the entry's time.
func TestAccountingRetention(t *testing.T) {
	f, w := acctFSM(t)
	a, b := spec("old"), spec("new")
	a.Hold, b.Hold = true, true
	applyAll(t, f, []*raft.Log{
		entry(t, 1, state.CmdSetConfig, &state.SetConfig{Settings: [][2]string{{"AccountingRetention", "3600"}}}),
		entry(t, 2, state.CmdSubmitJobs, &state.SubmitJobs{Now: t0, FirstID: 1, Jobs: stateSpecs(a, b)}),
		entry(t, 3, state.CmdCancelJobs, &state.CancelJobs{Now: t0.Add(time.Minute), IDs: []uint64{1}}),
		entry(t, 4, state.CmdCancelJobs, &state.CancelJobs{Now: t0.Add(90 * time.Minute), IDs: []uint64{2}}),
	})
	if s := summary(t, w); s.Records != 2 {
		t.Fatalf("%d records before the purge, want 2", s.Records)
	}
	f.Apply(entry(t, 5, state.CmdPurgeJobs, &state.PurgeJobs{Now: t0.Add(2 * time.Hour)}))
	recs, err := w.store.Select(accounting.Query{AllUsers: true})
	if err != nil || len(recs) != 1 || recs[0].JobID != 2 {
		t.Errorf("after a purge at +2h with a retention of 1h the store holds %+v (%v), want job 2's record only", recs, err)
	}
}
