package ctld

import (
	"bufio"
	"encoding/json"
	"io"

	"corral/api"
	"corral/ctld/state"
)

// writeJobList streams a job list as a JSON array without the scripts and
// environments, which listings never show and which dominate their size.
// prio and migration fill what is derived when a job is read (its
// priority now, whether its run could migrate).
func writeJobList(w io.Writer, jobs []jobView, prio func(*state.Job) int64, migration func(*api.Job)) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := json.NewEncoder(bw)
	if _, err := bw.WriteString("["); err != nil {
		return err
	}
	for i, v := range jobs {
		if i > 0 {
			if err := bw.WriteByte(','); err != nil {
				return err
			}
		}
		slim := v.slim()
		slim.Priority = prio(v.job)
		migration(&slim)
		if err := enc.Encode(&slim); err != nil {
			return err
		}
	}
	if _, err := bw.WriteString("]\n"); err != nil {
		return err
	}
	return bw.Flush()
}
