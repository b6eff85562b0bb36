package accounting

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The export formats: NDJSON (one record per line, the wire's JSON) and
// CSV with the columns of ExportColumns, for tenants' analysts and tools
// such as Open XDMoD's importers. Times are RFC 3339 in UTC (empty when
// unset); TRES columns hold counts; GPUs by type as "type=n;type=n".

// ExportColumns are the CSV export's columns, in order.
var ExportColumns = []string{
	"job_id", "ref", "array_job_id", "array_task_id", "alloc_id", "final",
	"name", "user", "tenant", "account", "partition", "qos", "work_dir",
	"submit", "eligible", "start", "end", "time_limit_s", "elapsed_s",
	"state", "exit_code", "signal", "reason", "node_list",
	"req_cpu", "req_mem_mb", "req_nodes", "req_gpus", "alloc_cpu", "alloc_mem_mb", "alloc_nodes", "alloc_gpus",
	"cpu_s", "mem_mb_s", "gpu_s", "billing_rate", "billing",
	"restarts", "preemptions", "total_cpu_s", "max_rss_kb",
}

// ExportFormats are the formats NewExporter writes.
var ExportFormats = []string{"csv", "ndjson", "parquet"}

// Exporter writes records to a file in one of the export formats, a
// chunk at a time, so that an export never holds every record.
type Exporter interface {
	// Write writes recs after those written before.
	Write(recs []Record) error
	// Close finishes the file (the Parquet footer; buffered bytes).
	Close() error
}

// NewExporter returns an exporter writing format (one of ExportFormats)
// to w.
func NewExporter(format string, w io.Writer) (Exporter, error) {
	switch format {
	case "csv":
		cw := csv.NewWriter(w)
		return &csvExporter{w: cw}, cw.Write(ExportColumns)
	case "ndjson":
		bw := bufio.NewWriterSize(w, 64<<10)
		return &ndjsonExporter{w: bw, enc: json.NewEncoder(bw)}, nil
	case "parquet":
		return newParquetExporter(w), nil
	}
	return nil, fmt.Errorf("export format %q: give one of %s", format, strings.Join(ExportFormats, ", "))
}

// WriteNDJSON writes records one JSON object a line.
func WriteNDJSON(w io.Writer, recs []Record) error { return export("ndjson", w, recs) }

// WriteCSV writes a header of ExportColumns and one row per record.
func WriteCSV(w io.Writer, recs []Record) error { return export("csv", w, recs) }

// export writes recs to w in format, whole.
func export(format string, w io.Writer, recs []Record) error {
	e, err := NewExporter(format, w)
	if err != nil {
		return err
	}
	if err := e.Write(recs); err != nil {
		return err
	}
	return e.Close()
}

type ndjsonExporter struct {
	w   *bufio.Writer
	enc *json.Encoder
}

func (e *ndjsonExporter) Write(recs []Record) error {
	for i := range recs {
		if err := e.enc.Encode(&recs[i]); err != nil {
			return fmt.Errorf("writing the record of job %d allocation %d: %w", recs[i].JobID, recs[i].AllocID, err)
		}
	}
	return nil
}

func (e *ndjsonExporter) Close() error { return e.w.Flush() }

type csvExporter struct{ w *csv.Writer }

func (e *csvExporter) Write(recs []Record) error {
	for i := range recs {
		if err := e.w.Write(csvRow(&recs[i])); err != nil {
			return err
		}
	}
	return nil
}

func (e *csvExporter) Close() error {
	e.w.Flush()
	return e.w.Error()
}

func csvRow(r *Record) []string {
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	t := func(v time.Time) string {
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format(time.RFC3339Nano)
	}
	return []string{
		u(r.JobID), r.Ref, u(r.ArrayJobID), i(int64(r.ArrayTaskID)), u(r.AllocID), strconv.FormatBool(r.Final),
		r.Name, r.User, r.Tenant, r.Account, r.Partition, r.QOS, r.WorkDir,
		t(r.Submit), t(r.Eligible), t(r.Start), t(r.End), i(r.TimeLimit), i(r.Elapsed),
		string(r.State), i(int64(r.ExitCode)), i(int64(r.Signal)), r.Reason, r.NodeList,
		i(int64(r.ReqTRES.CPU)), i(r.ReqTRES.MemMB), i(int64(r.ReqTRES.Nodes)), gpuList(r.ReqTRES.GPUs),
		i(int64(r.AllocTRES.CPU)), i(r.AllocTRES.MemMB), i(int64(r.AllocTRES.Nodes)), gpuList(r.AllocTRES.GPUs),
		f(r.CPUSeconds), f(r.MemSeconds), f(r.GPUSeconds), f(r.BillingRate), f(r.Billing),
		i(int64(r.Restarts)), i(int64(r.Preemptions)), f(r.TotalCPU), i(r.MaxRSSKB),
	}
}

// gpuList writes GPUs by type as "h100=2;=1" ("" is untyped), by type.
func gpuList(g map[string]int) string {
	var parts []string
	for _, typ := range slices.Sorted(maps.Keys(g)) {
		parts = append(parts, typ+"="+strconv.Itoa(g[typ]))
	}
	return strings.Join(parts, ";")
}
