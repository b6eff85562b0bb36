package display

import (
	"io"
	"math"
	"strconv"

	"corral/api"
)

// PriorityOptions choose what Priorities prints.
type PriorityOptions struct {
	// Normalized prints each factor in [0,1] with seven decimals, as
	// sprio -n does, instead of weight × factor.
	Normalized bool
	// NoHeader leaves out the header line (sprio -h).
	NoHeader bool
}

// priorityColumns is sprio's long layout ("%.15i %9r %.8u %.10Y %.10S
// %.10A %.10F %.10J %.10P %.10Q %.11N") with corral's ACCOUNT column after
// USER. Every cell is cut to its width, as sprio cuts.
var priorityColumns = []struct {
	name  string
	width int
	right bool
}{
	{"JOBID", 15, true}, {"PARTITION", 9, false}, {"USER", 8, true}, {"ACCOUNT", 10, true},
	{"PRIORITY", 10, true}, {"SITE", 10, true}, {"AGE", 10, true}, {"FAIRSHARE", 10, true},
	{"JOBSIZE", 10, true}, {"PARTITION", 10, true}, {"QOS", 10, true}, {"NICE", 11, true},
}

// Priorities renders `corral prio` (sprio): one line per pending job in
// the order given, with each factor weighted (weight × factor, rounded to
// an integer as sprio's "%.0f" rounds) or, with opts.Normalized, as the
// factor itself. PRIORITY is the job's priority; normalized, it is that
// priority over 2^32−1 with fourteen decimals cut to the column, exactly
// as sprio -n prints it. JOBID is the job's reference (12, or 12_5 for an
// array task), where sprio prints the bare number.
func Priorities(w io.Writer, rows []api.PriorityRow, opts PriorityOptions) error {
	var b []byte
	if !opts.NoHeader {
		b = appendPriorityHeader(b)
	}
	for i := range rows {
		b = appendPriorityLine(b, priorityCells(&rows[i], opts.Normalized))
	}
	_, err := w.Write(b)
	return err
}

// PriorityWeights renders sprio -w: the header (unless noHeader) and a
// "Weights" line holding each factor's weight.
func PriorityWeights(w io.Writer, weights api.PriorityWeights, noHeader bool) error {
	var b []byte
	if !noHeader {
		b = appendPriorityHeader(b)
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	b = appendPriorityLine(b, []string{"Weights", "", "", "", "",
		i(weights.Site), i(weights.Age), i(weights.Fairshare), i(weights.JobSize), i(weights.Partition), i(weights.QOS), ""})
	_, err := w.Write(b)
	return err
}

func appendPriorityHeader(dst []byte) []byte {
	cells := make([]string, len(priorityColumns))
	for i, c := range priorityColumns {
		cells[i] = c.name
	}
	return appendPriorityLine(dst, cells)
}

func appendPriorityLine(dst []byte, cells []string) []byte {
	start := len(dst)
	for i, c := range priorityColumns {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = appendPadded(dst, cells[i], c.width, c.right, true)
	}
	end := len(dst)
	for end > start && dst[end-1] == ' ' {
		end--
	}
	return append(dst[:end], '\n')
}

func priorityCells(r *api.PriorityRow, normalized bool) []string {
	ref := r.Ref
	if ref == "" {
		ref = strconv.FormatUint(r.JobID, 10)
	}
	wt := r.Weights
	factor := func(f float64, weight int64) string {
		if normalized {
			return strconv.FormatFloat(f, 'f', 7, 64)
		}
		// Go's 'f' rounding with precision 0 is C's "%.0f": to nearest,
		// ties to even.
		return strconv.FormatFloat(float64(weight)*f, 'f', 0, 64)
	}
	prio := strconv.FormatInt(r.Priority, 10)
	if normalized {
		prio = strconv.FormatFloat(float64(r.Priority)/math.MaxUint32, 'f', 14, 64)
	}
	return []string{
		ref, r.Partition, r.User, r.Account, prio,
		factor(r.Site, wt.Site), factor(r.Age, wt.Age), factor(r.Fairshare, wt.Fairshare),
		factor(r.JobSize, wt.JobSize), factor(r.PartF, wt.Partition), factor(r.QOSF, wt.QOS),
		strconv.Itoa(r.Nice),
	}
}
