package accounting

import (
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
)

// ParquetRow is one record in the Parquet export, the export's documented
// schema: integers as int64 or int32, times as timestamps in microseconds
// (UTC; start is null for a record without a run), strings
// dictionary-encoded, GPUs as the CSV export writes them ("h100=2").
type ParquetRow struct {
	JobID       int64      `parquet:"job_id"`
	Ref         string     `parquet:"ref"`
	ArrayJobID  int64      `parquet:"array_job_id"`
	ArrayTaskID int32      `parquet:"array_task_id"`
	AllocID     int64      `parquet:"alloc_id"`
	Final       bool       `parquet:"final"`
	Name        string     `parquet:"name,dict"`
	User        string     `parquet:"user,dict"`
	Tenant      string     `parquet:"tenant,dict"`
	Account     string     `parquet:"account,dict"`
	Partition   string     `parquet:"partition,dict"`
	QOS         string     `parquet:"qos,dict"`
	WorkDir     string     `parquet:"work_dir,dict"`
	Submit      time.Time  `parquet:"submit,timestamp(microsecond)"`
	Eligible    time.Time  `parquet:"eligible,timestamp(microsecond)"`
	Start       *time.Time `parquet:"start,optional,timestamp(microsecond)"`
	End         time.Time  `parquet:"end,timestamp(microsecond)"`
	TimeLimitS  int64      `parquet:"time_limit_s"`
	ElapsedS    int64      `parquet:"elapsed_s"`
	State       string     `parquet:"state,dict"`
	ExitCode    int32      `parquet:"exit_code"`
	Signal      int32      `parquet:"signal"`
	Reason      string     `parquet:"reason,dict"`
	NodeList    string     `parquet:"node_list,dict"`
	ReqCPU      int32      `parquet:"req_cpu"`
	ReqMemMB    int64      `parquet:"req_mem_mb"`
	ReqNodes    int32      `parquet:"req_nodes"`
	ReqGPUs     string     `parquet:"req_gpus,dict"`
	AllocCPU    int32      `parquet:"alloc_cpu"`
	AllocMemMB  int64      `parquet:"alloc_mem_mb"`
	AllocNodes  int32      `parquet:"alloc_nodes"`
	AllocGPUs   string     `parquet:"alloc_gpus,dict"`
	CPUSeconds  float64    `parquet:"cpu_s"`
	MemSeconds  float64    `parquet:"mem_mb_s"`
	GPUSeconds  float64    `parquet:"gpu_s"`
	BillingRate float64    `parquet:"billing_rate"`
	Billing     float64    `parquet:"billing"`
	Restarts    int32      `parquet:"restarts"`
	Preemptions int32      `parquet:"preemptions"`
	TotalCPUS   float64    `parquet:"total_cpu_s"`
	MaxRSSKB    int64      `parquet:"max_rss_kb"`
}

// ToParquetRow returns r as the Parquet export writes it.
func ToParquetRow(r *Record) ParquetRow {
	row := ParquetRow{
		JobID: int64(r.JobID), Ref: r.Ref, ArrayJobID: int64(r.ArrayJobID), ArrayTaskID: int32(r.ArrayTaskID),
		AllocID: int64(r.AllocID), Final: r.Final, Name: r.Name, User: r.User, Tenant: r.Tenant, Account: r.Account,
		Partition: r.Partition, QOS: r.QOS, WorkDir: r.WorkDir,
		Submit: r.Submit.UTC(), Eligible: r.Eligible.UTC(), End: r.End.UTC(),
		TimeLimitS: r.TimeLimit, ElapsedS: r.Elapsed, State: string(r.State), ExitCode: int32(r.ExitCode),
		Signal: int32(r.Signal), Reason: r.Reason, NodeList: r.NodeList,
		ReqCPU: int32(r.ReqTRES.CPU), ReqMemMB: r.ReqTRES.MemMB, ReqNodes: int32(r.ReqTRES.Nodes), ReqGPUs: gpuList(r.ReqTRES.GPUs),
		AllocCPU: int32(r.AllocTRES.CPU), AllocMemMB: r.AllocTRES.MemMB, AllocNodes: int32(r.AllocTRES.Nodes),
		AllocGPUs:  gpuList(r.AllocTRES.GPUs),
		CPUSeconds: r.CPUSeconds, MemSeconds: r.MemSeconds, GPUSeconds: r.GPUSeconds, BillingRate: r.BillingRate,
		Billing: r.Billing, Restarts: int32(r.Restarts), Preemptions: int32(r.Preemptions), TotalCPUS: r.TotalCPU, MaxRSSKB: r.MaxRSSKB,
	}
	if !r.Start.IsZero() {
		s := r.Start.UTC()
		row.Start = &s
	}
	return row
}

// parquetBatch is how many rows WriteParquet converts at once.
const parquetBatch = 4096

// WriteParquet writes records as a Parquet file of ParquetRow rows
// (Snappy-compressed).
func WriteParquet(w io.Writer, recs []Record) error { return export("parquet", w, recs) }

// parquetExporter writes ParquetRow rows, converted a batch at a time.
type parquetExporter struct {
	pw   *parquet.GenericWriter[ParquetRow]
	rows []ParquetRow
}

func newParquetExporter(w io.Writer) *parquetExporter {
	return &parquetExporter{
		pw:   parquet.NewGenericWriter[ParquetRow](w, parquet.Compression(&parquet.Snappy)),
		rows: make([]ParquetRow, 0, parquetBatch),
	}
}

func (e *parquetExporter) Write(recs []Record) error {
	for len(recs) > 0 {
		n := min(len(recs), parquetBatch)
		e.rows = e.rows[:0]
		for i := range n {
			e.rows = append(e.rows, ToParquetRow(&recs[i]))
		}
		if _, err := e.pw.Write(e.rows); err != nil {
			return fmt.Errorf("writing Parquet rows up to job %d: %w", recs[n-1].JobID, err)
		}
		recs = recs[n:]
	}
	return nil
}

func (e *parquetExporter) Close() error {
	if err := e.pw.Close(); err != nil {
		return fmt.Errorf("finishing the Parquet file: %w", err)
	}
	return nil
}
