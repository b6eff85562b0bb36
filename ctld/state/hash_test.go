package state

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestHashCoversEveryField changes every replicated field of a populated
// state, one at a time, and checks that the hash changes: a field the hash
// missed would be a field a snapshot loses and replicas could disagree on
// unnoticed. The fields are found by reflection, so a field added later is
// covered without touching this test. Derived indexes (Pending, Tasks,
// ArrayTasks and the unexported ones) are rebuilt from the records and are
// not walked.
func TestHashCoversEveryField(t *testing.T) {
	r := newReplica()
	applyAll(t, r, everyCommandLog(t))
	s := restoredCopy(t, r).s // a private copy: its records may be changed in place
	w := &fieldWalker{t: t, hash: s.Hash}
	w.value(reflect.ValueOf(&s.NextJobID).Elem(), "NextJobID")
	w.value(reflect.ValueOf(&s.NextAllocID).Elem(), "NextAllocID")
	w.value(reflect.ValueOf(&s.NextMigrationID).Elem(), "NextMigrationID")
	for _, id := range slices.Sorted(maps.Keys(s.Migrations)) {
		w.value(reflect.ValueOf(s.Migrations[id]).Elem(), fmt.Sprintf("Migrations[%d]", id))
	}
	if len(s.Migrations) == 0 {
		t.Fatal("the state holds no migrations; the log makes some")
	}
	w.value(reflect.ValueOf(&s.Index).Elem(), "Index")
	w.value(reflect.ValueOf(&s.Config).Elem(), "Config")
	for _, id := range slices.Sorted(maps.Keys(s.Jobs)) {
		w.value(reflect.ValueOf(s.Jobs[id]).Elem(), fmt.Sprintf("Jobs[%d]", id))
	}
	for _, id := range slices.Sorted(maps.Keys(s.Allocs)) {
		w.value(reflect.ValueOf(s.Allocs[id]).Elem(), fmt.Sprintf("Allocs[%d]", id))
	}
	for _, name := range sortedKeys(s.Nodes) {
		w.value(reflect.ValueOf(s.Nodes[name]).Elem(), "Nodes["+name+"]")
	}
	for _, name := range sortedKeys(s.QOS) {
		w.value(reflect.ValueOf(s.QOS[name]).Elem(), "QOS["+name+"]")
	}
	w.value(reflect.ValueOf(&s.Seeded).Elem(), "Seeded")
	for _, name := range sortedKeys(s.Partitions) {
		w.value(reflect.ValueOf(s.Partitions[name]).Elem(), "Partitions["+name+"]")
	}
	for _, name := range sortedKeys(s.Accounts) {
		w.value(reflect.ValueOf(s.Accounts[name]).Elem(), "Accounts["+name+"]")
	}
	for k, u := range s.Users {
		w.value(reflect.ValueOf(u).Elem(), fmt.Sprintf("Users[%v]", k))
	}
	for _, id := range sortedKeys(s.Tokens) {
		w.value(reflect.ValueOf(s.Tokens[id]).Elem(), "Tokens["+id+"]")
	}
	for _, u := range sortedKeys(s.Roles) {
		w.value(reflect.ValueOf(s.Roles[u]).Elem(), "Roles["+u+"]")
	}
	for i := range s.Audit {
		w.value(reflect.ValueOf(&s.Audit[i]).Elem(), fmt.Sprintf("Audit[%d]", i))
	}
	for _, n := range sortedKeys(s.Attestations) {
		w.value(reflect.ValueOf(s.Attestations[n]).Elem(), "Attestations["+n+"]")
	}
	for _, n := range sortedKeys(s.Reservations) {
		w.value(reflect.ValueOf(s.Reservations[n]).Elem(), "Reservations["+n+"]")
	}
	if len(s.Reservations) == 0 {
		t.Fatal("the state holds no reservations; the log makes one")
	}
	if len(s.Attestations) == 0 {
		t.Fatal("the state holds no attestations; the log makes some")
	}
	if len(s.Audit) == 0 {
		t.Fatal("the state holds no audit records; the log makes some")
	}
	if len(s.Tokens) == 0 || len(s.Roles) == 0 {
		t.Fatalf("the state holds %d tokens and %d role grants; the log makes both", len(s.Tokens), len(s.Roles))
	}
	// The blobs are the state's own (unexported, content-addressed):
	// changing any one's content or parts changes the hash.
	for _, r := range s.blobRecords() {
		k, b := r.Key, s.blobs[mustKey(t, r.Key)]
		if len(b.parts) == 0 {
			w.change("blobs["+k+"].text", func() func() {
				old := b.text
				b.text += "x"
				return func() { b.text = old }
			})
			continue
		}
		w.change("blobs["+k+"].parts", func() func() {
			old := b.parts
			b.parts = append(slices.Clip(b.parts), b.parts[0])
			return func() { b.parts = old }
		})
	}
	if len(s.blobs) < 2 {
		t.Fatalf("the state holds %d blobs; the log's jobs have scripts and environments", len(s.blobs))
	}
	for _, id := range slices.Sorted(maps.Keys(s.Notices)) {
		w.value(reflect.ValueOf(s.Notices[id]).Elem(), fmt.Sprintf("Notices[%d]", id))
	}
	if len(s.Notices) == 0 {
		t.Fatal("the state holds no notices; the log makes some")
	}
	w.value(reflect.ValueOf(&s.NextNoticeID).Elem(), "NextNoticeID")
	w.value(reflect.ValueOf(&s.NoticesDropped).Elem(), "NoticesDropped")
	w.mapValue(reflect.ValueOf(s.Usage), "Usage")
	w.mapValue(reflect.ValueOf(s.Members), "Members")
	w.change("Requests", func() func() {
		old := s.Requests
		s.Requests = old.clone()
		s.Requests.add("carol", "new-id", 99, t0, s.Config.RequestIDRetention)
		return func() { s.Requests = old }
	})
	if w.leaves < 100 {
		t.Fatalf("walked %d fields; the walk is broken", w.leaves)
	}
	t.Logf("changed %d fields one at a time", w.leaves)
	// Every exported field of State is walked above or is an index
	// rebuilt from the records: a field added to State must be named in
	// one list or the other.
	walked := []string{"Jobs", "Allocs", "Nodes", "NextJobID", "NextAllocID", "Migrations", "NextMigrationID", "Requests", "Members", "Config",
		"Partitions", "Seeded", "QOS", "Accounts", "Users", "Usage", "Tokens", "Roles", "Audit", "Attestations", "Index", "Reservations",
		"Notices", "NextNoticeID", "NoticesDropped"}
	derived := []string{"Pending", "Tasks", "ArrayTasks"}
	st := reflect.TypeOf(State{})
	for i := 0; i < st.NumField(); i++ {
		if f := st.Field(i); f.IsExported() && !slices.Contains(walked, f.Name) && !slices.Contains(derived, f.Name) {
			t.Errorf("State.%s is neither walked by this test nor listed as derived: change it in the walk, or say why it need not be hashed", f.Name)
		}
	}
}

// fieldWalker changes every leaf field under a value, one at a time, and
// checks that hash changes each time; it puts every value back.
type fieldWalker struct {
	t      *testing.T
	hash   func() string
	leaves int
}

var timeType = reflect.TypeOf(time.Time{})

// change applies a change and checks the hash; the change returns its undo.
func (w *fieldWalker) change(path string, do func() (undo func())) {
	before := w.hash()
	undo := do()
	if w.hash() == before {
		w.t.Errorf("changing %s leaves the state hash unchanged", path)
	}
	undo()
	if w.hash() != before {
		w.t.Fatalf("putting %s back does not restore the hash: the walk is broken", path)
	}
	w.leaves++
}

// value walks v (addressable), changing each leaf under it.
// prefixType is netip.Prefix, a leaf to the walker.
var prefixType = reflect.TypeOf(netip.Prefix{})

func (w *fieldWalker) value(v reflect.Value, path string) {
	switch {
	case v.Type() == timeType:
		old := v.Interface().(time.Time)
		w.change(path, func() func() {
			v.Set(reflect.ValueOf(old.Add(time.Second)))
			return func() { v.Set(reflect.ValueOf(old)) }
		})
		return
	case v.Type() == prefixType:
		// No exported fields: a value of its own.
		old := v.Interface().(netip.Prefix)
		w.change(path, func() func() {
			v.Set(reflect.ValueOf(netip.MustParsePrefix("192.0.2.0/24")))
			return func() { v.Set(reflect.ValueOf(old)) }
		})
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			// A job's inline script and environment are how old entries
			// carried them; no record keeps them (blob.go).
			if f := v.Type().Field(i); f.IsExported() && f.Name != "InlineScript" && f.Name != "InlineEnv" {
				w.value(v.Field(i), path+"."+f.Name)
			}
		}
	case reflect.Pointer:
		if v.IsNil() {
			// A missing record: giving it one changes the hash; then its
			// own fields are walked from there.
			w.change(path, func() func() { v.Set(reflect.New(v.Type().Elem())); return func() { v.SetZero() } })
			v.Set(reflect.New(v.Type().Elem()))
			w.value(v.Elem(), path)
			v.SetZero()
			return
		}
		w.value(v.Elem(), path)
	case reflect.Slice:
		w.change(path+"[+]", func() func() {
			old := v.Interface()
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
			return func() { v.Set(reflect.ValueOf(old)) }
		})
		for i := 0; i < v.Len(); i++ {
			w.value(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		w.mapValue(v, path)
	default:
		w.leaf(v, path)
	}
}

// mapValue walks a map's values (copied out, changed, stored back) and
// adds an entry.
func (w *fieldWalker) mapValue(m reflect.Value, path string) {
	keys := m.MapKeys()
	sort.Slice(keys, func(a, b int) bool { return fmt.Sprint(keys[a]) < fmt.Sprint(keys[b]) })
	for _, k := range keys {
		old := m.MapIndex(k)
		cp := reflect.New(old.Type()).Elem()
		cp.Set(old)
		sub := &fieldWalker{t: w.t, hash: func() string { m.SetMapIndex(k, cp); return w.hash() }}
		sub.value(cp, fmt.Sprintf("%s[%v]", path, k))
		m.SetMapIndex(k, old)
		w.leaves += sub.leaves
	}
	if m.Type().Key().Kind() == reflect.String && !m.IsNil() {
		w.change(path+"[+]", func() func() {
			k := reflect.ValueOf("added-by-test").Convert(m.Type().Key())
			m.SetMapIndex(k, reflect.Zero(m.Type().Elem()))
			return func() { m.SetMapIndex(k, reflect.Value{}) }
		})
	}
}

// leaf changes a value of a basic kind.
func (w *fieldWalker) leaf(v reflect.Value, path string) {
	old := reflect.New(v.Type()).Elem()
	old.Set(v)
	var set func()
	switch v.Kind() {
	case reflect.Bool:
		set = func() { v.SetBool(!old.Bool()) }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		set = func() { v.SetInt(old.Int() + 1) }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		set = func() { v.SetUint(old.Uint() + 1) }
	case reflect.Float32, reflect.Float64:
		set = func() { v.SetFloat(old.Float() + 1.5) }
	case reflect.String:
		set = func() { v.SetString(old.String() + "x") }
	default:
		w.t.Errorf("%s: a field of kind %s the walk cannot change", path, v.Kind())
		return
	}
	w.change(path, func() func() { set(); return func() { v.Set(old) } })
}

// TestSnapshotRefusesUnknownRecords checks that a snapshot line of no known
// kind, or with a field this build does not know, is an error rather than
// skipped.
func TestSnapshotRefusesUnknownRecords(t *testing.T) {
	for name, line := range map[string]string{
		"an unknown record kind":    `{"reservation":{"job":1}}`,
		"an unknown field of a job": `{"job":{"id":1,"state":"PENDING","colour":"blue"}}`,
		"an empty record":           `{}`,
	} {
		t.Run(name, func(t *testing.T) {
			snap := `{"format":2,"index":3,"next_job_id":2}` + "\n" + line + "\n"
			if _, err := ReadSnapshot(stringsReader(snap)); err == nil {
				t.Fatalf("a snapshot with %s was read without an error", name)
			}
		})
	}
	// The policy record's QoS of the default state reads back.
	s := New()
	s.QOS["x"] = &api.QOS{Name: "x"}
	if _, err := ReadSnapshot(stringsReader(snapshotText(t, s))); err != nil {
		t.Fatal(err)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// snapshotText writes a snapshot of s as text.
func snapshotText(t *testing.T, s *State) string {
	t.Helper()
	var b strings.Builder
	if err := s.Snapshot().Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func mustKey(t *testing.T, s string) blobKey {
	k, err := parseBlobKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
