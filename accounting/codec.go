package accounting

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"corral/api"
)

// The store's record encoding. Records were stored as JSON at first; the
// encoding below is what every record is stored as now: JSON cost 7 µs
// a record to decode, which made an export of a year's records (1,000,000)
// take a minute, and this one costs well under a microsecond. A store
// written with JSON is converted when it is opened (upgradeCodec); the
// decoder still reads JSON, so a record that a reader finds in either
// form means the same.
//
// Layout, after the version byte: the fields of api.AcctRecord in their
// declaration order; integers as (zigzag) varints, strings and maps with
// a uvarint length first, maps by sorted key (so that one record has one
// encoding: the store's digest hashes the bytes), times as zigzag Unix
// seconds and uvarint nanoseconds in UTC, floats as their 8 IEEE bytes.
// TestCodecCoversEveryField fails when a field is added to the record and
// not here. Fields added to the record are added at the end, as a group
// that the decoder reads only when bytes are left: a record stored before
// the group existed ends before it and reads with the group's zero
// values, so stores never need converting for a new field (the multi-node
// fields are the first such group).

// codecV1 is the first byte of a record in this encoding (JSON records
// start with '{').
const codecV1 = 1

// errCodec is what a cut or malformed encoding reads as.
var errCodec = errors.New("malformed record encoding")

// appendRecord appends the encoding of r to dst.
func appendRecord(dst []byte, r *Record) []byte {
	e := encoder{b: append(dst, codecV1)}
	e.uint(r.JobID)
	e.str(r.Ref)
	e.uint(r.ArrayJobID)
	e.int(int64(r.ArrayTaskID))
	e.uint(r.AllocID)
	e.bool(r.Final)
	for _, s := range []string{r.Name, r.User, r.Tenant, r.Account, r.Partition, r.QOS, r.WorkDir} {
		e.str(s)
	}
	for _, t := range []time.Time{r.Submit, r.Eligible, r.Start, r.End} {
		e.time(t)
	}
	e.int(r.TimeLimit)
	e.int(r.Elapsed)
	e.str(string(r.State))
	e.int(int64(r.ExitCode))
	e.int(int64(r.Signal))
	e.str(r.Reason)
	e.str(r.Message)
	e.str(r.NodeList)
	e.tres(&r.ReqTRES)
	e.tres(&r.AllocTRES)
	for _, f := range []float64{r.CPUSeconds, r.MemSeconds, r.GPUSeconds, r.BillingRate, r.Billing} {
		e.float(f)
	}
	e.int(int64(r.Restarts))
	e.int(int64(r.Preemptions))
	e.float(r.TotalCPU)
	e.int(r.MaxRSSKB)
	e.str(r.BatchNode)
	e.tres(&r.BatchTRES)
	e.uint(uint64(len(r.Steps)))
	for i := range r.Steps {
		st := &r.Steps[i]
		e.int(int64(st.ID))
		e.str(st.Name)
		e.str(st.NodeList)
		for _, v := range []int{st.Nodes, st.NTasks, st.CPUs} {
			e.int(int64(v))
		}
		e.str(string(st.State))
		e.int(int64(st.ExitCode))
		e.int(int64(st.Signal))
		e.time(st.Start)
		e.time(st.End)
	}
	return e.b
}

// decodeRecord decodes a stored record, in this encoding or in JSON, into
// r (overwritten).
func decodeRecord(val []byte, r *Record) error {
	if len(val) > 0 && val[0] == '{' {
		*r = Record{}
		return json.Unmarshal(val, r)
	}
	if len(val) == 0 || val[0] != codecV1 {
		return fmt.Errorf("%w: unknown version", errCodec)
	}
	d := decoder{b: val[1:]}
	*r = Record{
		JobID: d.uint(), Ref: d.str(), ArrayJobID: d.uint(), ArrayTaskID: int(d.int()), AllocID: d.uint(), Final: d.bool(),
		Name: d.str(), User: d.str(), Tenant: d.str(), Account: d.str(), Partition: d.str(), QOS: d.str(), WorkDir: d.str(),
		Submit: d.time(), Eligible: d.time(), Start: d.time(), End: d.time(),
		TimeLimit: d.int(), Elapsed: d.int(),
		State: api.JobState(d.str()), ExitCode: int(d.int()), Signal: int(d.int()),
		Reason: d.str(), Message: d.str(), NodeList: d.str(),
	}
	d.tres(&r.ReqTRES)
	d.tres(&r.AllocTRES)
	r.CPUSeconds, r.MemSeconds, r.GPUSeconds, r.BillingRate, r.Billing = d.float(), d.float(), d.float(), d.float(), d.float()
	r.Restarts, r.Preemptions = int(d.int()), int(d.int())
	r.TotalCPU, r.MaxRSSKB = d.float(), d.int()
	// Fields added later: a record written before them ends here.
	if d.err == nil && len(d.b) > 0 {
		d.multiNode(r)
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the record", errCodec, len(d.b))
	}
	return nil
}

// multiNode reads the fields of a multi-node run: its batch node and
// what that node held, and its steps.
func (d *decoder) multiNode(r *Record) {
	r.BatchNode = d.str()
	d.tres(&r.BatchTRES)
	// A step is at least 13 bytes.
	if n := d.uint(); n > uint64(len(d.b))/13 {
		d.fail()
	} else if n > 0 {
		r.Steps = make([]api.AcctStep, n)
		for i := range r.Steps {
			r.Steps[i] = api.AcctStep{ID: int(d.int()), Name: d.str(), NodeList: d.str(),
				Nodes: int(d.int()), NTasks: int(d.int()), CPUs: int(d.int()),
				State: api.JobState(d.str()), ExitCode: int(d.int()), Signal: int(d.int()), Start: d.time(), End: d.time()}
		}
	}
}

type encoder struct{ b []byte }

func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) float(f float64) {
	e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(f))
}

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) time(t time.Time) {
	e.int(t.Unix())
	e.uint(uint64(t.Nanosecond()))
}

func (e *encoder) tres(t *api.TRES) {
	e.int(int64(t.CPU))
	e.int(t.MemMB)
	e.uint(uint64(len(t.GPUs)))
	for _, k := range slices.Sorted(maps.Keys(t.GPUs)) {
		e.str(k)
		e.int(int64(t.GPUs[k]))
	}
	e.int(int64(t.Nodes))
	e.uint(uint64(len(t.Hugepages)))
	for _, k := range slices.Sorted(maps.Keys(t.Hugepages)) {
		e.str(k)
		e.int(t.Hugepages[k])
	}
	e.int(int64(t.VFs))
}

// decoder reads an encoding; its first error sticks and later reads give
// zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: cut short", errCodec)
	}
	d.b = nil
}

func (d *decoder) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) bool() bool {
	if len(d.b) == 0 || d.b[0] > 1 {
		d.fail()
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

func (d *decoder) float() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func (d *decoder) time() time.Time {
	sec, nsec := d.int(), d.uint()
	if nsec >= 1e9 {
		d.fail()
		return time.Time{}
	}
	if sec == zeroUnix && nsec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// zeroUnix is the zero time's Unix seconds.
var zeroUnix = time.Time{}.Unix()

// count reads a map's length, refusing one longer than what is left
// could hold (a key and a value are at least 2 bytes).
func (d *decoder) count() int {
	n := d.uint()
	if n > uint64(len(d.b))/2 {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) tres(t *api.TRES) {
	t.CPU, t.MemMB = int(d.int()), d.int()
	if n := d.count(); n > 0 {
		t.GPUs = make(map[string]int, n)
		for range n {
			k := d.str()
			t.GPUs[k] = int(d.int())
		}
	}
	t.Nodes = int(d.int())
	if n := d.count(); n > 0 {
		t.Hugepages = make(map[string]int64, n)
		for range n {
			k := d.str()
			t.Hugepages[k] = d.int()
		}
	}
	t.VFs = int(d.int())
}
