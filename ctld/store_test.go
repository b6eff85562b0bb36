package ctld

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"corral/api"
	"corral/ctld/state"
)

// TestAuditVerifyFindsTamperedStore runs an authenticating member, makes
// audit records, stops it and reads a copy of its store: the copy's chains
// verify; after one record is altered in the copied Raft log, the replay
// says which entry no longer matches its hash.
func TestAuditVerifyFindsTamperedStore(t *testing.T) {
	sc := newAuthScene(t)
	sc.submitAs(t, "alice", "phys", true)
	sc.do(t, pUserB, "POST", "/v1/config", map[string]any{"settings": [][2]string{{"MinJobAge", "1"}}})
	var n int
	waitFor(t, func() bool {
		sc.leader.fsm.Read(func(s *state.State) { n = len(s.Audit) })
		return n >= 2
	})
	dir := sc.leader.cfg.DataDir
	sc.tc.stop()
	copyDir := func() string {
		dst := filepath.Join(t.TempDir(), "copy")
		if out, err := exec.Command("cp", "-a", dir, dst).CombinedOutput(); err != nil {
			t.Fatalf("copying the store: %v: %s", err, out)
		}
		return dst
	}
	s, problems, err := ReadStore(copyDir())
	if err != nil || len(problems) > 0 {
		t.Fatalf("an intact copy: %v %v", err, problems)
	}
	if errs := api.VerifyAudit(s.Audit, s.AuditHeads()); len(s.Audit) < 2 || len(errs) > 0 {
		t.Fatalf("an intact copy's %d records: %v", len(s.Audit), errs)
	}

	tampered := copyDir()
	store, err := raftboltdb.NewBoltStore(filepath.Join(tampered, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	last, _ := store.LastIndex()
	changed := uint64(0)
	for i := uint64(1); i <= last && changed == 0; i++ {
		var l raft.Log
		if store.GetLog(i, &l) != nil || l.Type != raft.LogCommand || len(l.Data) == 0 || state.CommandType(l.Data[0]) != state.CmdAuditRecords {
			continue
		}
		if !bytes.Contains(l.Data, []byte(`"user":"bob"`)) {
			continue
		}
		l.Data = bytes.Replace(l.Data, []byte(`"user":"bob"`), []byte(`"user":"eve"`), 1)
		if err := store.StoreLog(&l); err != nil {
			t.Fatal(err)
		}
		changed = i
	}
	store.Close()
	if changed == 0 {
		t.Fatal("no audit entry of bob's found in the log")
	}
	_, problems, err = ReadStore(tampered)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) == 0 || !strings.Contains(problems[0].Error(), "does not match its hash") {
		t.Fatalf("the tampered copy (entry %d): %v; want the entry named as not matching its hash", changed, problems)
	}
}
