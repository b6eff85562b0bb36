package pgsink

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"corral/accounting"
)

// The table's columns, in order: the one list the table's definition, the
// upsert and the documentation (docs/accounting-postgres.md) follow.
// Times are timestamptz; a time or figure that is not known is NULL (a
// run that never started has no start_time; a job without a time limit
// no time_limit_s; a run the node measured nothing of no total_cpu_s).
// Names are text, ” when not set.
var columns = []column{
	{"job_id", "bigint NOT NULL", "the job's id", func(r *accounting.Record) any { return int64(r.JobID) }},
	{"alloc_id", "bigint NOT NULL", "the run's allocation; 0 for a job's end without a run (cancelled while pending)", func(r *accounting.Record) any { return int64(r.AllocID) }},
	{"job_ref", "text NOT NULL", `how users name the job: "12", "12_5" (task 5 of array 12)`, func(r *accounting.Record) any { return r.Ref }},
	{"array_job_id", "bigint", "the array's job id, NULL for a job that is not an array task", func(r *accounting.Record) any { return nullInt(int64(r.ArrayJobID), r.ArrayJobID != 0) }},
	{"array_task_id", "integer", "the array task's index, NULL for a job that is not one", func(r *accounting.Record) any { return nullInt(int64(r.ArrayTaskID), r.ArrayJobID != 0) }},
	{"final", "boolean NOT NULL", "the job's last run (or its end without one): it carries the job's state and exit code", func(r *accounting.Record) any { return r.Final }},
	{"job_name", "text NOT NULL", "the job's name", func(r *accounting.Record) any { return r.Name }},
	{"user_name", "text NOT NULL", "the job's user", func(r *accounting.Record) any { return r.User }},
	{"tenant", "text NOT NULL", "the top-level account", func(r *accounting.Record) any { return r.Tenant }},
	{"account", "text NOT NULL", "the account charged", func(r *accounting.Record) any { return r.Account }},
	{"partition", "text NOT NULL", "", func(r *accounting.Record) any { return r.Partition }},
	{"qos", "text NOT NULL", "", func(r *accounting.Record) any { return r.QOS }},
	{"work_dir", "text NOT NULL", "", func(r *accounting.Record) any { return r.WorkDir }},
	{"submit_time", "timestamptz NOT NULL", "", func(r *accounting.Record) any { return nullTime(r.Submit) }},
	{"eligible_time", "timestamptz", "the later of submit and --begin", func(r *accounting.Record) any { return nullTime(r.Eligible) }},
	{"start_time", "timestamptz", "the run's start; NULL when it never started", func(r *accounting.Record) any { return nullTime(r.Start) }},
	{"end_time", "timestamptz NOT NULL", "", func(r *accounting.Record) any { return nullTime(r.End) }},
	{"time_limit_s", "bigint", "NULL: no limit", func(r *accounting.Record) any { return nullInt(r.TimeLimit, r.TimeLimit > 0) }},
	{"elapsed_s", "bigint NOT NULL", "the run's time, suspensions left out", func(r *accounting.Record) any { return r.Elapsed }},
	{"state", "text NOT NULL", "Slurm's job state names: COMPLETED, FAILED, TIMEOUT, ...", func(r *accounting.Record) any { return string(r.State) }},
	{"exit_code", "integer NOT NULL", "", func(r *accounting.Record) any { return int32(r.ExitCode) }},
	{"signal", "integer NOT NULL", "the signal that ended the run; 0 for none", func(r *accounting.Record) any { return int32(r.Signal) }},
	{"reason", "text NOT NULL", "", func(r *accounting.Record) any { return r.Reason }},
	{"message", "text NOT NULL", "", func(r *accounting.Record) any { return r.Message }},
	{"node_list", "text NOT NULL", "", func(r *accounting.Record) any { return r.NodeList }},
	{"req_cpus", "integer NOT NULL", "", func(r *accounting.Record) any { return int32(r.ReqTRES.CPU) }},
	{"req_mem_mb", "bigint NOT NULL", "", func(r *accounting.Record) any { return r.ReqTRES.MemMB }},
	{"req_gpus", "integer NOT NULL", "GPUs of every type", func(r *accounting.Record) any { return int32(r.ReqTRES.GPUCount()) }},
	{"req_nodes", "integer NOT NULL", "", func(r *accounting.Record) any { return int32(r.ReqTRES.Nodes) }},
	{"alloc_cpus", "integer NOT NULL", "", func(r *accounting.Record) any { return int32(r.AllocTRES.CPU) }},
	{"alloc_mem_mb", "bigint NOT NULL", "", func(r *accounting.Record) any { return r.AllocTRES.MemMB }},
	{"alloc_gpus", "integer NOT NULL", "GPUs of every type", func(r *accounting.Record) any { return int32(r.AllocTRES.GPUCount()) }},
	{"alloc_nodes", "integer NOT NULL", "", func(r *accounting.Record) any { return int32(r.AllocTRES.Nodes) }},
	{"req_tres", "jsonb NOT NULL", `the requested TRES as the API gives them: {"cpu","mem_mb","gpus":{type:n},"nodes","hugepages":{size_kb:n},"vfs"}`, func(r *accounting.Record) any { return jsonOf(r.ReqTRES) }},
	{"alloc_tres", "jsonb NOT NULL", "the allocated TRES, as req_tres", func(r *accounting.Record) any { return jsonOf(r.AllocTRES) }},
	{"cpu_seconds", "double precision NOT NULL", "allocated CPUs × elapsed", func(r *accounting.Record) any { return r.CPUSeconds }},
	{"mem_mb_seconds", "double precision NOT NULL", "allocated MiB × elapsed", func(r *accounting.Record) any { return r.MemSeconds }},
	{"gpu_seconds", "double precision NOT NULL", "allocated GPUs × elapsed", func(r *accounting.Record) any { return r.GPUSeconds }},
	{"billing_rate", "double precision NOT NULL", "billing per second, as the billing weights price the run's TRES", func(r *accounting.Record) any { return r.BillingRate }},
	{"billing", "double precision NOT NULL", "billing_rate × elapsed", func(r *accounting.Record) any { return r.Billing }},
	{"restarts", "integer NOT NULL", "the job's earlier runs (requeues) at this run's end", func(r *accounting.Record) any { return int32(r.Restarts) }},
	{"preemptions", "integer NOT NULL", "", func(r *accounting.Record) any { return int32(r.Preemptions) }},
	{"total_cpu_s", "double precision", "CPU time the node measured; NULL when it measured none", func(r *accounting.Record) any { return nullFloat(r.TotalCPU) }},
	{"max_rss_kb", "bigint", "peak RSS the node measured; NULL when it measured none", func(r *accounting.Record) any { return nullInt(r.MaxRSSKB, r.MaxRSSKB > 0) }},
	{"record", "jsonb NOT NULL", "the whole record as GET /v1/accounting/jobs gives it (fields a later corral adds appear here first)", func(r *accounting.Record) any { return jsonOf(r) }},
	{"change_index", "bigint NOT NULL", "the Raft index of the entry that last changed the record: a row is only ever replaced by a later change", nil},
}

// column is one column of the records table: its name, type, what it
// holds, and its value for a record (nil for change_index, which is the
// record's place in the feed).
type column struct {
	name, typ, doc string
	value          func(r *accounting.Record) any
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func nullInt(v int64, known bool) any {
	if !known {
		return nil
	}
	return v
}

func nullFloat(v float64) any {
	if v == 0 {
		return nil
	}
	return v
}

// jsonOf encodes v for a jsonb column (the wire's JSON, which cannot fail
// for these types).
func jsonOf(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding an accounting record's field: %v", err))
	}
	return string(b)
}

// schemaVersion is the version of the tables below; a later corral that
// changes them migrates from it.
const schemaVersion = 1

// Table names: the records and the sink's cursor. To keep several
// clusters apart in one database, give each its own schema in the DSN
// (search_path).
const (
	recordsTable = "corral_accounting"
	cursorTable  = "corral_accounting_cursor"
)

// ddl creates the tables and their indexes where absent.
func ddl() []string {
	var cols []string
	for _, c := range columns {
		cols = append(cols, c.name+" "+c.typ)
	}
	cols = append(cols, "shipped_at timestamptz NOT NULL DEFAULT now()", "PRIMARY KEY (job_id, alloc_id)")
	return []string{
		"CREATE TABLE IF NOT EXISTS " + recordsTable + " (\n\t" + strings.Join(cols, ",\n\t") + "\n)",
		// sacct-like selections: one user's or account's runs in a
		// window of end times, everyone's in a window.
		"CREATE INDEX IF NOT EXISTS " + recordsTable + "_user_end ON " + recordsTable + " (user_name, end_time)",
		"CREATE INDEX IF NOT EXISTS " + recordsTable + "_account_end ON " + recordsTable + " (account, end_time)",
		"CREATE INDEX IF NOT EXISTS " + recordsTable + "_tenant_end ON " + recordsTable + " (tenant, end_time)",
		"CREATE INDEX IF NOT EXISTS " + recordsTable + "_end ON " + recordsTable + " (end_time)",
		`CREATE TABLE IF NOT EXISTS ` + cursorTable + ` (
	id integer PRIMARY KEY CHECK (id = 1),
	change_index bigint NOT NULL,
	job_id bigint NOT NULL,
	alloc_id bigint NOT NULL,
	schema_version integer NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
)`,
	}
}

// stagingTable receives a batch by COPY, the fastest way in; one
// statement then moves it into the records table. It is a temporary table
// of the sink's session, emptied at each commit.
const stagingTable = "corral_accounting_batch"

const stagingSQL = "CREATE TEMPORARY TABLE IF NOT EXISTS " + stagingTable + " (LIKE " + recordsTable + " INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"

// columnNames are the columns a batch is copied into.
func columnNames() []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.name
	}
	return out
}

// mergeSQL moves a batch from the staging table into the records table: a
// new key is inserted; a stored one is replaced only by a later change of
// a different record, so a shipment repeated after an outage, or one of a
// member that stopped leading a moment late, leaves the row as it is. (A
// batch holds each key once: the feed lists each record once.)
func mergeSQL() string {
	var sets []string
	for _, c := range columns {
		if c.name != "job_id" && c.name != "alloc_id" {
			sets = append(sets, c.name+" = EXCLUDED."+c.name)
		}
	}
	sets = append(sets, "shipped_at = now()")
	names := strings.Join(columnNames(), ", ")
	return "INSERT INTO " + recordsTable + " (" + names + ") SELECT " + names + " FROM " + stagingTable +
		" ON CONFLICT (job_id, alloc_id) DO UPDATE SET " + strings.Join(sets, ", ") +
		" WHERE " + recordsTable + ".change_index <= EXCLUDED.change_index AND " + recordsTable + ".record IS DISTINCT FROM EXCLUDED.record"
}

// cursorSQL moves the cursor forward (never back: a member that stopped
// leading a moment late cannot undo its successor's progress).
const cursorSQL = `INSERT INTO ` + cursorTable + ` (id, change_index, job_id, alloc_id, schema_version) VALUES (1, $1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET change_index = EXCLUDED.change_index, job_id = EXCLUDED.job_id, alloc_id = EXCLUDED.alloc_id,
	schema_version = EXCLUDED.schema_version, updated_at = now()
WHERE (` + cursorTable + `.change_index, ` + cursorTable + `.job_id, ` + cursorTable + `.alloc_id) < (EXCLUDED.change_index, EXCLUDED.job_id, EXCLUDED.alloc_id)`

// args returns a change's row: its values in columns' order.
func args(ch *accounting.Change) []any {
	out := make([]any, len(columns))
	for i, c := range columns {
		if c.value == nil {
			out[i] = int64(ch.Pos.Index)
			continue
		}
		out[i] = c.value(&ch.Record)
	}
	return out
}
