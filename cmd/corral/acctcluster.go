package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"corral/accounting/usageplot"
	"corral/api"
)

// reportTRES reads -T: the TRES a cluster report shows (cpu, gres/gpu;
// gpu and billing are taken too, billing for --svg), cpu by default.
func reportTRES(v string) ([]string, error) {
	if v == "" {
		return []string{"cpu"}, nil
	}
	var out []string
	for _, t := range strings.Split(strings.ToLower(v), ",") {
		switch t = strings.TrimSpace(t); t {
		case "cpu", "gres/gpu", "billing":
		case "gpu":
			t = "gres/gpu"
		case "all":
			out = append(out, "cpu", "gres/gpu")
			continue
		default:
			return nil, fmt.Errorf("acct report: --tres=%s: %q is no TRES corral reports; use cpu, gres/gpu or billing", v, t)
		}
		out = append(out, t)
	}
	return out, nil
}

// utilization writes sreport's cluster Utilization: one line per TRES asked
// for (with a TRES Name column when -T named them, as sreport does), the
// figures in the report's unit. The columns widen for large figures.
func (r usageReport) utilization(b *strings.Builder, rows []api.ClusterUtilization, tres []string, named bool) {
	unitOf := "CPU"
	if named {
		unitOf = "TRES"
	}
	r.banner(b, "Cluster Utilization", "", unitOf)
	cols := []string{"Cluster", "Allocated", "Down", "PLND Down", "Idle", "Planned", "Reported"}
	widths := []int{9, 12, 10, 10, 12, 9, 12}
	if named {
		cols = append([]string{cols[0], "TRES Name"}, cols[1:]...)
		widths = append([]int{widths[0], 14}, widths[1:]...)
	}
	var lines [][]string
	for _, t := range tres {
		if t == "billing" {
			continue // the cluster's billing has no capacity to report against
		}
		row := api.ClusterUtilization{TRES: t}
		for _, x := range rows {
			if x.TRES == t {
				row = x
			}
		}
		cells := []string{r.cluster}
		if named {
			cells = append(cells, t)
		}
		for _, v := range []float64{row.Allocated, row.Down, row.PlannedDown, row.Idle, row.Planned, row.Reported} {
			cells = append(cells, strconv.FormatInt(int64(v/r.per+0.5), 10))
		}
		lines = append(lines, cells)
	}
	for _, cells := range lines {
		for i, c := range cells {
			widths[i] = max(widths[i], len(c))
		}
	}
	r.columns(b, cols, widths)
	for _, cells := range lines {
		r.line(b, cells, widths)
	}
}

// writeUsageSVG draws the usage of [start, end) by account over time and
// the jobs' waits into file, the usage in the measure of tres.
func writeUsageSVG(ctx context.Context, cl *api.Client, file string, start, end time.Time, tres string) error {
	series, err := cl.AccountingSeries(ctx, start, end, 0)
	if err != nil {
		return err
	}
	measure := usageplot.CPUHours
	switch tres {
	case "gres/gpu":
		measure = usageplot.GPUHours
	case "billing":
		measure = usageplot.Billing
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".corral-svg-*")
	if err != nil {
		return fmt.Errorf("--svg %s: %w", file, err)
	}
	defer os.Remove(tmp.Name())
	err = usageplot.SVG(tmp, series, usageplot.Options{Measure: measure, Location: time.Local})
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("--svg %s: %w", file, err)
	}
	return nil
}
