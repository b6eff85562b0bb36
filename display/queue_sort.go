package display

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"corral/api"
)

// This file is squeue's -S/--sort: a comma-separated list of keys, each an
// -o letter or an -O name, "+" (the default) ascending or "-" descending,
// applied in order. squeue's own default is "P,t,-p": partition name, then
// the compact state as text (so CD, CG and PD come before R), then
// priority, highest first. Jobs equal in every key keep job id order.

// DefaultQueueSort is squeue's default -S.
const DefaultQueueSort = "P,t,-p"

// QueueSort is a parsed -S list.
type QueueSort struct {
	keys []sortField
}

type sortField struct {
	cmp  func(a, b *api.Job, now time.Time) int
	desc bool
}

type jobCmp = func(a, b *api.Job, now time.Time) int

func byString(get func(*api.Job) string) jobCmp {
	return func(a, b *api.Job, _ time.Time) int { return strings.Compare(get(a), get(b)) }
}

func byInt(get func(*api.Job) int64) jobCmp {
	return func(a, b *api.Job, _ time.Time) int { return cmp.Compare(get(a), get(b)) }
}

func byTime(get func(*api.Job) time.Time) jobCmp {
	return func(a, b *api.Job, _ time.Time) int { return get(a).Compare(get(b)) }
}

// byJobID is squeue's "i": by array (or job) id, then task.
func byJobID(a, b *api.Job, _ time.Time) int {
	if c := cmp.Compare(arrayIDOf(a), arrayIDOf(b)); c != 0 {
		return c
	}
	return cmp.Compare(a.ArrayTaskID, b.ArrayTaskID)
}

func arrayIDOf(j *api.Job) uint64 {
	if j.ArrayJobID != 0 {
		return j.ArrayJobID
	}
	return j.ID
}

func elapsedOf(j *api.Job, now time.Time) int64 { return elapsedSecs(j, now) }

// sortKeys maps -S keys, letters and long names, to comparisons.
var sortKeys = map[string]jobCmp{}

func init() {
	state := byString(func(j *api.Job) string { return j.State.Short() })
	longState := byString(func(j *api.Job) string { return string(j.State) })
	prio := byInt(func(j *api.Job) int64 { return j.Priority })
	used := func(a, b *api.Job, now time.Time) int { return cmp.Compare(elapsedOf(a, now), elapsedOf(b, now)) }
	left := func(a, b *api.Job, now time.Time) int {
		return cmp.Compare(a.Spec.TimeLimit-elapsedOf(a, now), b.Spec.TimeLimit-elapsedOf(b, now))
	}
	keys := []struct {
		names string
		cmp   jobCmp
	}{
		{"a,account", byString(func(j *api.Job) string { return j.Spec.Account })},
		{"A,F,arrayjobid", byInt(func(j *api.Job) int64 { return int64(arrayIDOf(j)) })},
		{"C,numcpus", byInt(func(j *api.Job) int64 { return int64(cpusOf(j)) })},
		{"D,numnodes", byInt(func(*api.Job) int64 { return 1 })},
		{"e,endtime", byTime(func(j *api.Job) time.Time { t, _ := expectedEnd(j); return t })},
		{"i,jobid", byJobID},
		{"j,name", byString(func(j *api.Job) string { return j.Spec.Name })},
		{"K,arraytaskid", byInt(func(j *api.Job) int64 { return int64(j.ArrayTaskID) })},
		{"l,timelimit", byInt(func(j *api.Job) int64 { return j.Spec.TimeLimit })},
		{"L,timeleft", left},
		{"m,minmemory", byInt(memOf)},
		{"M,timeused", used},
		{"N,nodelist", func(a, b *api.Job, _ time.Time) int { return compareNodeNames(a.Node, b.Node) }},
		{"p,Q,priority,prioritylong", prio},
		{"P,partition", byString(partitionOf)},
		{"q,qos", byString(func(j *api.Job) string { return j.Spec.QOS })},
		{"r,reason", byString(reasonOf)},
		{"S,starttime", byTime(func(j *api.Job) time.Time { return j.StartTime })},
		{"t,statecompact", state},
		{"T,state", longState},
		{"u,username", byString(func(j *api.Job) string { return j.Spec.User })},
		{"V,submittime", byTime(func(j *api.Job) time.Time { return j.SubmitTime })},
		{"y,nice", byInt(func(j *api.Job) int64 { return int64(j.Spec.Nice) })},
		{"Z,workdir", byString(func(j *api.Job) string { return j.Spec.WorkDir })},
	}
	for _, k := range keys {
		for _, name := range strings.Split(k.names, ",") {
			sortKeys[name] = k.cmp
		}
	}
}

// ParseQueueSort parses -S: keys separated by commas, each an -o letter or
// an -O name (case matters for letters, as "t" and "T" differ; long names
// are matched in any case), with "+" or "-" before it. An empty list is
// DefaultQueueSort.
func ParseQueueSort(spec string) (*QueueSort, error) {
	if strings.TrimSpace(spec) == "" {
		spec = DefaultQueueSort
	}
	s := &QueueSort{}
	for _, tok := range strings.Split(spec, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		var f sortField
		switch tok[0] {
		case '-':
			f.desc, tok = true, tok[1:]
		case '+':
			tok = tok[1:]
		}
		f.cmp = sortKeys[tok]
		if f.cmp == nil && len(tok) > 1 {
			f.cmp = sortKeys[strings.ToLower(tok)]
		}
		if f.cmp == nil {
			return nil, fmt.Errorf("Invalid sort specification: %s (in --sort %q; valid keys: %s)", tok, spec, sortKeyList())
		}
		s.keys = append(s.keys, f)
	}
	if len(s.keys) == 0 {
		return nil, fmt.Errorf("--sort %q names no key; valid keys: %s", spec, sortKeyList())
	}
	return s, nil
}

func sortKeyList() string {
	names := make([]string, 0, len(sortKeys))
	for n := range sortKeys {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// Compare orders a before b (negative), after it (positive), or neither;
// each job's Priority is the priority the keys p and Q compare, and now is
// when elapsed and remaining times are measured. Jobs equal in every key
// are ordered by id.
func (s *QueueSort) Compare(a, b *api.Job, now time.Time) int {
	for _, k := range s.keys {
		c := k.cmp(a, b, now)
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(a.ID, b.ID)
}
