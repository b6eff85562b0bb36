package api

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestVerifyAudit checks that VerifyAudit finds an altered record, a
// removed one and removed newest records, and takes an intact chain.
func TestVerifyAudit(t *testing.T) {
	heads := map[string]AuditHead{}
	var recs []AuditRecord
	for i, tn := range []string{"phys", "phys", "bio", "phys", "phys"} {
		recs = append(recs, AuditRecord{Tenant: tn, Time: time.Unix(1_800_000_000, 0).UTC(), Principal: "user alice (token t1)",
			User: "alice", Op: "POST /v1/jobs", Target: fmt.Sprintf("jobs %d", i+1), Status: 200})
	}
	ChainAudit(heads, recs)
	cases := []struct {
		name   string
		change func([]AuditRecord) []AuditRecord
		want   string
	}{
		{"intact", func(r []AuditRecord) []AuditRecord { return r }, ""},
		{"altered", func(r []AuditRecord) []AuditRecord { r[1].Target = "jobs 99"; return r }, "altered"},
		{"removed", func(r []AuditRecord) []AuditRecord { return append(r[:1:1], r[2:]...) }, "removed"},
		{"newest removed", func(r []AuditRecord) []AuditRecord { return r[:4] }, "newest records were removed"},
		{"rehashed after an alteration", func(r []AuditRecord) []AuditRecord {
			r[3].Principal = "user mallory"
			r[3].Hash = AuditHash(r[3])
			return r
		}, "does not follow"},
	}
	for _, c := range cases {
		errs := VerifyAudit(c.change(append([]AuditRecord(nil), recs...)), heads)
		got := fmt.Sprint(errs)
		if c.want == "" && len(errs) != 0 || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %v; want %q", c.name, errs, c.want)
		}
	}
}
