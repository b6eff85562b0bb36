package display

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"corral/api"
)

// This file is squeue's -O/--Format: Slurm's long field names, each
// "name[:[.][size][suffix]]", 20 columns wide when no size is given. Most
// names are another spelling of an -o letter and print what it prints;
// the rest (jobid, tres-alloc, cpus-per-task, exit_code) only exist here.

// queueLongFields maps -O names (lower case) to their fields.
var queueLongFields = map[string]*fieldDef{}

// ParseQueueLongFormat parses squeue's -O syntax into a format that renders
// like any -o format.
func ParseQueueLongFormat(spec string) (*QueueFormat, error) {
	f := &QueueFormat{}
	for _, tok := range strings.Split(spec, ",") {
		if strings.TrimSpace(tok) == "" {
			continue
		}
		name, size, hasSize := strings.Cut(tok, ":")
		name = strings.TrimSpace(name)
		def := queueLongFields[strings.ToLower(name)]
		if def == nil {
			return nil, fmt.Errorf("Invalid job format specification: %s (in --Format %q; valid fields: %s)", name, spec, queueLongList())
		}
		s, suffix, err := parseLongSize(spec, name, size, hasSize)
		if err != nil {
			return nil, err
		}
		f.cols = append(f.cols, column{def: def, width: s.width, right: s.right})
		if suffix != "" {
			f.cols = append(f.cols, column{lit: suffix})
		}
	}
	if len(f.cols) == 0 {
		return nil, fmt.Errorf("--Format %q names no field; valid fields: %s", spec, queueLongList())
	}
	return f, nil
}

func queueLongList() string {
	names := make([]string, 0, len(queueLongFields))
	for n := range queueLongFields {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// valueTresAlloc is tres-alloc: what a job that ran was given, as Slurm's
// TRES string (memory in whole G when it divides, else M); a job that never
// ran has none.
func valueTresAlloc(dst []byte, j *api.Job, _ *rowCtx) []byte {
	if j.Node == "" || j.StartTime.IsZero() {
		return append(dst, nullStr...)
	}
	dst = append(dst, "cpu="...)
	dst = strconv.AppendInt(dst, int64(j.CPUs), 10)
	dst = append(dst, ",mem="...)
	if j.MemMB > 0 && j.MemMB%1024 == 0 {
		dst = strconv.AppendInt(dst, j.MemMB/1024, 10)
		dst = append(dst, 'G')
	} else {
		dst = strconv.AppendInt(dst, j.MemMB, 10)
		dst = append(dst, 'M')
	}
	dst = append(dst, ",node=1,billing="...)
	dst = strconv.AppendInt(dst, int64(j.CPUs), 10)
	for _, g := range j.Spec.Gres {
		dst = append(dst, ",gres/"...)
		dst = append(dst, g.Name...)
		dst = append(dst, '=')
		dst = strconv.AppendInt(dst, int64(g.Count), 10)
	}
	return dst
}

// initQueueLongFields fills queueLongFields from the -o table, once that
// is built (queue_fields.go's init calls it).
func initQueueLongFields() {
	letters := map[string]byte{
		"account": 'a', "arrayjobid": 'F', "arraytaskid": 'K', "batchhost": 'B', "command": 'o', "comment": 'k',
		"contiguous": 'O', "cores": 'I', "corespec": 'X', "dependency": 'E', "endtime": 'e', "feature": 'f',
		"gres": 'b', "jobarrayid": 'i', "licenses": 'W', "mincpus": 'c', "minmemory": 'm', "mintmpdisk": 'd',
		"name": 'j', "nice": 'y', "nodelist": 'N', "numcpus": 'C', "numnodes": 'D', "oversubscribe": 'h',
		"partition": 'P', "priority": 'p', "prioritylong": 'Q', "qos": 'q', "reason": 'r', "reasonlist": 'R',
		"reqnodes": 'n', "excnodes": 'x', "reservation": 'v', "schednodes": 'Y', "sct": 'z', "sockets": 'H',
		"starttime": 'S', "state": 'T', "statecompact": 't', "submittime": 'V', "threads": 'J', "timeleft": 'L',
		"timelimit": 'l', "timeused": 'M', "tres-per-node": 'b', "username": 'u', "wckey": 'w', "workdir": 'Z',
	}
	for name, code := range letters {
		queueLongFields[name] = fieldDefs[code]
	}
	queueLongFields["jobid"] = &fieldDef{header: "JOBID", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
		return strconv.AppendUint(dst, j.ID, 10)
	}}
	queueLongFields["tres-alloc"] = &fieldDef{header: "TRES_ALLOC", value: valueTresAlloc}
	queueLongFields["cpus-per-task"] = &fieldDef{header: "CPUS_PER_TASK", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
		return strconv.AppendInt(dst, int64(max(j.Spec.CPUsPerTask, 1)), 10)
	}}
	queueLongFields["exit_code"] = &fieldDef{header: "EXIT_CODE", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
		dst = strconv.AppendInt(dst, int64(j.ExitCode), 10)
		dst = append(dst, ':')
		return strconv.AppendInt(dst, int64(j.Signal), 10)
	}}
}
