package ctld

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"corral/api"
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
