package ctld

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"corral/api"
	"corral/ctld/state"
)

// TestAuditTrail checks that every write, accepted or refused, becomes an
// audit record in its caller's tenant chain, that each caller reads only
// what it may (a user its own, a coordinator its tenant's, an admin all),
// and that the chains verify.
func TestAuditTrail(t *testing.T) {
	sc := newAuthScene(t)
	mine := sc.submitAs(t, "alice", "phys", true)
	theirs := sc.submitAs(t, "bob", "bio", true)
	sc.do(t, pUserA, "POST", "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"ids": []uint64{theirs}}})
	sc.do(t, pUserB, "POST", "/v1/config", map[string]any{"settings": [][2]string{{"MinJobAge", "1"}}})
	sc.do(t, pAnon, "POST", "/v1/jobs/hold", map[string]any{"ids": []uint64{mine}, "hold": false})
	sc.do(t, pAdmin, "POST", "/v1/config", map[string]any{"settings": [][2]string{{"MinJobAge", "600"}}})
	read := func(who string) api.AuditView {
		status, body := sc.do(t, who, "GET", "/v1/audit", nil)
		var v api.AuditView
		if status != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
			t.Fatalf("GET /v1/audit as %s: %d %s", who, status, body)
		}
		return v
	}
	waitFor(t, func() bool { return len(read(pAdmin).Records) >= 6 })
	all := read(pAdmin)
	find := func(v api.AuditView, op, user string, status int) bool {
		for _, r := range v.Records {
			if r.Op == op && r.User == user && r.Status == status {
				return true
			}
		}
		return false
	}
	alice, bob, carol := read(pUserA), read(pUserB), read(pCoord)
	checks := map[string]bool{
		"alice's submission, in tenant phys": find(all, "POST /v1/jobs", "alice", 200) && all.Records[0].Tenant == "phys" && all.Records[0].Target == fmt.Sprintf("jobs %d", mine),
		"alice's refused cancel":             find(all, "POST /v1/jobs/cancel", "alice", 200),
		"bob's refused config change":        find(all, "POST /v1/config", "bob", 403),
		"the anonymous hold, refused":        find(all, "POST /v1/jobs/hold", "", 401),
		"the admin's config change":          find(all, "POST /v1/config", "root", 200),
		"alice reads only her own":           len(alice.Records) == 2 && !find(alice, "POST /v1/config", "bob", 403),
		"bob reads only his own":             len(bob.Records) == 2 && !find(bob, "POST /v1/jobs", "alice", 200),
		"carol reads tenant phys":            find(carol, "POST /v1/jobs", "alice", 200) && !find(carol, "POST /v1/jobs", "bob", 200),
		"the chains verify":                  len(api.VerifyAudit(all.Records, all.Heads)) == 0,
		"a refusal says why":                 strings.Contains(fmt.Sprint(all.Records), "may not call POST /v1/config"),
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("%s: no", name)
		}
	}
	if t.Failed() {
		for _, r := range all.Records {
			t.Logf("%+v", r)
		}
	}
}

// TestCommandsCarryTheirPrincipal makes each change a user may ask for
// through the API and reads the Raft log: every entry names who asked, as
// the credentials proved it (whatever the request said of itself).
func TestCommandsCarryTheirPrincipal(t *testing.T) {
	sc := newAuthScene(t)
	held := sc.submitAs(t, "alice", "phys", true)
	requests := []struct {
		who, path string
		body      any
	}{
		{pUserA, "/v1/jobs/hold", map[string]any{"ids": []uint64{held}, "hold": false}},
		{pUserA, "/v1/jobs/update", map[string]any{"id": held, "dependency": nil}},
		{pUserA, "/v1/jobs/suspend", map[string]any{"ids": []uint64{held}, "suspend": true}},
		{pUserA, "/v1/jobs/requeue", map[string]any{"ids": []uint64{held}}},
		{pUserA, "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"ids": []uint64{held}}, "by": "mallory"}},
		{pUserA, "/v1/tokens", map[string]any{"description": "ci"}},
		{pOperator, "/v1/nodes/drain", map[string]any{"node": "n9", "drain": false}},
		{pOperator, "/v1/qos", map[string]any{"qos": map[string]any{"name": "t"}}},
		{pOperator, "/v1/partitions", map[string]any{"name": "debug", "create": true}},
		{pCoord, "/v1/users", map[string]any{"user": map[string]any{"name": "dave", "account": "hep"}}},
		{pAdmin, "/v1/config", map[string]any{"settings": [][2]string{{"MinJobAge", "600"}}}},
		{pAdmin, "/v1/accounts", map[string]any{"account": map[string]any{"name": "tmp", "parent": "root"}}},
		{pAdmin, "/v1/roles", map[string]any{"grant": map[string]any{"user": "erin", "role": "operator"}}},
	}
	for _, rq := range requests {
		sc.do(t, rq.who, "POST", rq.path, rq.body)
	}
	want := map[state.CommandType]string{
		state.CmdHoldRelease: "alice", state.CmdUpdateJob: "alice", state.CmdSuspendJobs: "alice", state.CmdCancelJobs: "alice",
		state.CmdRequeueJobs: "alice", state.CmdPutToken: "alice", state.CmdNodeDrain: "oscar", state.CmdPutQOS: "oscar", state.CmdPutPartition: "oscar",
		state.CmdPutUser: "carol", state.CmdSetConfig: "root", state.CmdPutAccount: "root", state.CmdSetRole: "root",
	}
	got := map[state.CommandType]string{}
	last, _ := sc.leader.node.store.LastIndex()
	for i := uint64(1); i <= last; i++ {
		var l raft.Log
		if sc.leader.node.store.GetLog(i, &l) != nil || l.Type != raft.LogCommand {
			continue
		}
		ct, p, err := state.Decode(l.Data)
		if err != nil {
			t.Fatal(err)
		}
		if by := principalOfCommand(p); by != "" {
			got[ct] = by
		}
	}
	for ct, who := range want {
		if got[ct] != who {
			t.Errorf("%s: the log names %q as who asked; want %q", ct, got[ct], who)
		}
	}
}

// principalOfCommand is the "who asked" field of a user's command.
func principalOfCommand(p any) string {
	switch c := p.(type) {
	case *state.HoldRelease:
		return c.By
	case *state.UpdateJob:
		return c.By
	case *state.SuspendJobs:
		return c.ByUser
	case *state.RequeueJobs:
		return c.By
	case *state.CancelJobs:
		return c.By
	case *state.PutToken:
		return c.By
	case *state.NodeDrain:
		return c.By
	case *state.PutQOS:
		return c.By
	case *state.PutPartition:
		return c.By
	case *state.PutUser:
		return c.By
	case *state.SetConfig:
		return c.By
	case *state.PutAccount:
		return c.By
	case *state.SetRole:
		return c.By
	}
	return ""
}
