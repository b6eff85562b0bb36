package display

import (
	"time"

	"corral/api"
)

// QueueRow is one line of a queue listing as cells: the job it shows (an
// array's pending task, with QueueOptions.Array, as a copy naming the
// task) and each field's value.
type QueueRow struct {
	Job   *api.Job
	Cells []string
}

// QueueTable renders jobs as QueueRefs does, but as cells for a page that
// lays out its own table (the controllers' status page): the fields'
// headers and each row's values, neither padded nor cut, and escaped as
// every value this package prints. The format's literal text is left out.
func QueueTable(jobs []*api.Job, opts QueueOptions, now time.Time) ([]string, []QueueRow, error) {
	f, err := opts.Layout()
	if err != nil {
		return nil, nil, err
	}
	var header []string
	for _, col := range f.cols {
		if col.def != nil {
			header = append(header, col.def.header)
		}
	}
	c := rowCtx{now: now, loc: now.Location(), prio: opts.Priority}
	var buf []byte
	row := func(j *api.Job) QueueRow {
		r := QueueRow{Job: j, Cells: make([]string, 0, len(header))}
		for i := range f.cols {
			if def := f.cols[i].def; def != nil {
				buf = escapeTail(def.value(buf[:0], j, &c), 0)
				r.Cells = append(r.Cells, string(buf))
			}
		}
		return r
	}
	rows := make([]QueueRow, 0, len(jobs))
	for _, j := range jobs {
		if opts.Start && !pendingLike(j.State) {
			continue
		}
		if opts.Array && j.IsArrayPending() {
			j.ArrayPending.Each(func(i int) bool {
				if opts.ShowTask == nil || opts.ShowTask(arrayIDOf(j), i) {
					task := *j
					task.ArrayPending, task.ArrayJobID, task.ArrayTaskID = nil, arrayIDOf(j), i
					rows = append(rows, row(&task))
				}
				return true
			})
			continue
		}
		rows = append(rows, row(j))
	}
	return header, rows, nil
}
