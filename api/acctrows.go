package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AcctRowsType is the media type of the compact accounting listing
// (GET /v1/accounting/jobs?format=rows): a version line, then one record
// per line, its fields separated by tabs, strings escaped as in the job
// listing (JobRowsType). Every user's records of a month (86,000) are
// 46 MB of JSON that take seconds to encode and to decode; as rows they
// are a third of that and decode an order of magnitude faster. Every
// field of AcctRecord travels.
const AcctRowsType = "application/x-corral-acct"

// acctRowsVersion is the first line of a listing; bump it when fields
// change.
const acctRowsVersion = "corral-acct 2"

// acctRowFields is the number of tab-separated fields of a row: 25
// scalars, two TRES sets of 6 fields, 9 figures, the batch node and its
// TRES set, and the steps (a JSON list, empty when none: few records
// have steps).
const acctRowFields = 54

// AcctRowWriter writes records in the compact listing, one at a time, so
// that a server streams them as it reads them.
type AcctRowWriter struct {
	w   *bufio.Writer
	buf []byte
}

// NewAcctRowWriter starts a listing on w; Flush ends it.
func NewAcctRowWriter(w io.Writer) *AcctRowWriter {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.WriteString(acctRowsVersion + "\n")
	return &AcctRowWriter{w: bw, buf: make([]byte, 0, 512)}
}

// Write writes one record.
func (a *AcctRowWriter) Write(r *AcctRecord) error {
	a.buf = appendAcctRow(a.buf[:0], r)
	_, err := a.w.Write(a.buf)
	return err
}

// Flush writes what is buffered.
func (a *AcctRowWriter) Flush() error { return a.w.Flush() }

func appendAcctRow(b []byte, r *AcctRecord) []byte {
	b = strconv.AppendUint(b, r.JobID, 10)
	b = append(b, '\t')
	b = appendEscaped(b, r.Ref)
	b = append(b, '\t')
	b = strconv.AppendUint(b, r.ArrayJobID, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(r.ArrayTaskID), 10)
	b = append(b, '\t')
	b = strconv.AppendUint(b, r.AllocID, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(boolInt(r.Final)), 10)
	for _, v := range []string{r.Name, r.User, r.Tenant, r.Account, r.Partition, r.QOS, r.WorkDir} {
		b = append(b, '\t')
		b = appendEscaped(b, v)
	}
	for _, t := range []time.Time{r.Submit, r.Eligible, r.Start, r.End} {
		b = append(b, '\t')
		if !t.IsZero() {
			b = strconv.AppendInt(b, t.UnixNano(), 10)
		}
	}
	b = append(b, '\t')
	b = strconv.AppendInt(b, r.TimeLimit, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, r.Elapsed, 10)
	for _, v := range []string{string(r.State), strconv.Itoa(r.ExitCode), strconv.Itoa(r.Signal), r.Reason, r.Message, r.NodeList} {
		b = append(b, '\t')
		b = appendEscaped(b, v)
	}
	b = appendTRES(b, &r.ReqTRES)
	b = appendTRES(b, &r.AllocTRES)
	for _, v := range []float64{r.CPUSeconds, r.MemSeconds, r.GPUSeconds, r.BillingRate, r.Billing} {
		b = append(b, '\t')
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(r.Restarts), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(r.Preemptions), 10)
	b = append(b, '\t')
	b = strconv.AppendFloat(b, r.TotalCPU, 'g', -1, 64)
	b = append(b, '\t')
	b = strconv.AppendInt(b, r.MaxRSSKB, 10)
	b = append(b, '\t')
	b = appendEscaped(b, r.BatchNode)
	b = appendTRES(b, &r.BatchTRES)
	b = append(b, '\t')
	if len(r.Steps) > 0 {
		// JSON escapes control characters: the list holds no tab or
		// newline, and encoding a slice of plain structs cannot fail.
		js, _ := json.Marshal(r.Steps)
		b = append(b, js...)
	}
	return append(b, '\n')
}

// appendTRES writes a TRES set as six fields: CPUs, MiB, nodes, VFs, and
// the GPUs and hugepages as name=count lists (names query-escaped, in
// name order).
func appendTRES(b []byte, t *TRES) []byte {
	for _, v := range []int64{int64(t.CPU), t.MemMB, int64(t.Nodes), int64(t.VFs)} {
		b = append(b, '\t')
		b = strconv.AppendInt(b, v, 10)
	}
	b = append(b, '\t')
	b = appendCounts(b, t.GPUs)
	b = append(b, '\t')
	return appendCounts(b, t.Hugepages)
}

func appendCounts[N int | int64](b []byte, m map[string]N) []byte {
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, url.QueryEscape(k)...)
		b = append(b, '=')
		b = strconv.AppendInt(b, int64(m[k]), 10)
	}
	return b
}

// DecodeAcctRows reads a listing written by AcctRowWriter.
func DecodeAcctRows(r io.Reader) ([]AcctRecord, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	head, rest, _ := bytes.Cut(data, []byte{'\n'})
	if string(head) != acctRowsVersion {
		return nil, fmt.Errorf("accounting listing: unknown format %q (want %q): is the controller a newer version?", head, acctRowsVersion)
	}
	recs := make([]AcctRecord, 0, bytes.Count(rest, []byte{'\n'}))
	// One string for the whole body: fields are substrings of it.
	body := string(rest)
	var fields [acctRowFields]string
	for line := 1; len(body) > 0; line++ {
		row, next, _ := strings.Cut(body, "\n")
		body = next
		if n := splitTabs(row, fields[:]); n != acctRowFields {
			return nil, fmt.Errorf("accounting listing line %d: %d fields, want %d", line, n, acctRowFields)
		}
		recs = append(recs, AcctRecord{})
		if err := decodeAcctRow(&recs[len(recs)-1], fields[:]); err != nil {
			return nil, fmt.Errorf("accounting listing line %d: %w", line, err)
		}
	}
	return recs, nil
}

// acctFields reads a row's fields in order, keeping the first error.
type acctFields struct {
	f   []string
	i   int
	err error
}

func (d *acctFields) next() string {
	s := d.f[d.i]
	d.i++
	return s
}

func (d *acctFields) str() string { return unescape(d.next()) }

func (d *acctFields) int() int64 {
	s := d.next()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil && d.err == nil {
		d.err = fmt.Errorf("field %d: %q is not a whole number", d.i-1, s)
	}
	return n
}

func (d *acctFields) uint() uint64 {
	s := d.next()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil && d.err == nil {
		d.err = fmt.Errorf("field %d: %q is not a whole number", d.i-1, s)
	}
	return n
}

func (d *acctFields) float() float64 {
	s := d.next()
	v, err := strconv.ParseFloat(s, 64)
	if (err != nil || math.IsNaN(v)) && d.err == nil {
		d.err = fmt.Errorf("field %d: %q is not a number", d.i-1, s)
	}
	return v
}

func (d *acctFields) time() time.Time {
	s := d.next()
	if s == "" {
		return time.Time{}
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil && d.err == nil {
		d.err = fmt.Errorf("field %d: %q is not a time", d.i-1, s)
	}
	return time.Unix(0, ns).UTC()
}

func decodeAcctRow(r *AcctRecord, f []string) error {
	d := &acctFields{f: f}
	r.JobID = d.uint()
	r.Ref = d.str()
	r.ArrayJobID, r.ArrayTaskID, r.AllocID, r.Final = d.uint(), int(d.int()), d.uint(), d.int() != 0
	r.Name, r.User, r.Tenant, r.Account, r.Partition, r.QOS, r.WorkDir = d.str(), d.str(), d.str(), d.str(), d.str(), d.str(), d.str()
	r.Submit, r.Eligible, r.Start, r.End = d.time(), d.time(), d.time(), d.time()
	r.TimeLimit, r.Elapsed = d.int(), d.int()
	r.State = JobState(d.str())
	r.ExitCode, r.Signal = int(d.int()), int(d.int())
	r.Reason, r.Message, r.NodeList = d.str(), d.str(), d.str()
	r.ReqTRES, r.AllocTRES = d.tres(), d.tres()
	r.CPUSeconds, r.MemSeconds, r.GPUSeconds, r.BillingRate, r.Billing = d.float(), d.float(), d.float(), d.float(), d.float()
	r.Restarts, r.Preemptions = int(d.int()), int(d.int())
	r.TotalCPU, r.MaxRSSKB = d.float(), d.int()
	r.BatchNode, r.BatchTRES = d.str(), d.tres()
	if js := d.next(); js != "" {
		if err := json.Unmarshal([]byte(js), &r.Steps); err != nil && d.err == nil {
			d.err = fmt.Errorf("field %d: the steps: %w", d.i-1, err)
		}
		if len(r.Steps) == 0 {
			r.Steps = nil // as "[]" would be written: not at all
		}
	}
	return d.err
}

func (d *acctFields) tres() TRES {
	t := TRES{CPU: int(d.int()), MemMB: d.int(), Nodes: int(d.int()), VFs: int(d.int())}
	if m := d.counts(); m != nil {
		t.GPUs = make(map[string]int, len(m))
		for k, v := range m {
			t.GPUs[k] = int(v)
		}
	}
	t.Hugepages = d.counts()
	return t
}

func (d *acctFields) counts() map[string]int64 {
	s := d.next()
	if s == "" {
		return nil
	}
	m := map[string]int64{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		n, nerr := strconv.ParseInt(v, 10, 64)
		if (!ok || err != nil || nerr != nil) && d.err == nil {
			d.err = fmt.Errorf("field %d: %q is not a name=count list", d.i-1, s)
		}
		m[name] = n
	}
	return m
}
