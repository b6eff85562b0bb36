package main

import (
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestClusterUtilizationLayout lays known figures out as sreport cluster
// Utilization does: in the unit of -t, a TRES Name column when -T named
// the TRES (a TRES the cluster lacks is all zeros), columns widened for
// large figures, and -P.
func TestClusterUtilizationLayout(t *testing.T) {
	h := 3600.0
	rows := []api.ClusterUtilization{{TRES: "cpu", Count: 16, Allocated: 4 * h, Down: 1 * h, PlannedDown: 4 * h, Idle: 5 * h, Planned: 2 * h, Reported: 16 * h}}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.Local)
	r := usageReport{start: start, end: start.Add(24 * time.Hour), unit: "Hours", per: 3600, cluster: "corral"}
	var b strings.Builder
	r.utilization(&b, rows, []string{"cpu"}, false)
	want := strings.Repeat("-", 80) + `
Cluster Utilization 2026-12-01T00:00:00 - 2026-12-01T23:59:59
Usage reported in CPU Hours
` + strings.Repeat("-", 80) + `
  Cluster    Allocated       Down  PLND Down         Idle   Planned     Reported
--------- ------------ ---------- ---------- ------------ --------- ------------
   corral            4          1          4            5         2           16
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	r.unit, r.per, r.parsable, r.noHeader = "Seconds", 1, true, true
	rows[0].Reported = 1e13
	b.Reset()
	r.utilization(&b, rows, []string{"cpu", "gres/gpu"}, true)
	if want := "corral|cpu|14400|3600|14400|18000|7200|10000000000000\ncorral|gres/gpu|0|0|0|0|0|0\n"; b.String() != want {
		t.Errorf("-P -n -T cpu,gres/gpu: got\n%s\nwant\n%s", b.String(), want)
	}
	r.parsable, r.noHeader = false, false
	b.Reset()
	r.utilization(&b, rows, []string{"cpu"}, true)
	lines := strings.Split(b.String(), "\n")
	if lines[2] != "Usage reported in TRES Seconds" || lines[4] != "  Cluster      TRES Name    Allocated       Down  PLND Down         Idle   Planned       Reported" ||
		!strings.HasSuffix(lines[6], " 10000000000000") {
		t.Errorf("a named TRES and a wide figure:\n%s", b.String())
	}
}

// FuzzReportOptions reads arbitrary -T lists and report names: nothing
// may panic, and what is taken is only what the report knows.
func FuzzReportOptions(f *testing.F) {
	for _, s := range []string{"cpu", "cpu,gres/gpu", "GPU, billing", "all", "mem", ",", ""} {
		f.Add(s, "cluster utilization")
	}
	f.Fuzz(func(t *testing.T, tres, kind string) {
		got, err := reportTRES(tres)
		for _, x := range got {
			if err == nil && x != "cpu" && x != "gres/gpu" && x != "billing" {
				t.Fatalf("-T %q gave %q", tres, got)
			}
		}
		if err == nil && len(got) == 0 {
			t.Fatalf("-T %q gave no TRES and no error", tres)
		}
		k, err := reportKind(strings.Fields(kind))
		if err == nil && k != "account" && k != "users" && k != "cluster" {
			t.Fatalf("report %q taken as %q", kind, k)
		}
	})
}
