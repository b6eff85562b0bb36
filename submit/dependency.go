package submit

import (
	"fmt"
	"strconv"
	"strings"

	"corral/api"
)

// dependencyTypes are the clause types ParseDependency accepts, in the
// order its errors list them.
var dependencyTypes = []string{"after", "afterany", "afterok", "afternotok", "aftercorr", "singleton"}

const dependencyForms = "use TYPE:JOBID[:JOBID...] with TYPE one of after, afterany, afterok, afternotok, aftercorr, or singleton; " +
	"join clauses with ',' (all of) or '?' (any of), e.g. --dependency=afterok:12:13,after:14+5"

// ParseDependency parses a Slurm --dependency expression. Clauses are
// TYPE:ID[:ID...] with TYPE after, afterany, afterok, afternotok or
// aftercorr, or the bare word singleton. Only after takes a delay, per job
// id: after:12+5:13 waits 5 minutes after job 12 starts. Clauses are joined
// by "," (all must hold) or "?" (any may); mixing the two is an error, as in
// Slurm. Ids are "12" or, for an array element, "12_3". A bare id list
// "12:13" means afterany:12:13, Slurm's legacy form.
//
// Ids of one clause that carry different delays become separate clauses,
// because api.DepClause holds one delay; the meaning is unchanged since
// every id is its own condition in Slurm.
func ParseDependency(s string) (*api.Dependency, error) {
	bad := func(why string) error {
		return optionError("--dependency", s, nil, "%s (%s)", why, dependencyForms)
	}
	if s == "" {
		return nil, bad("empty dependency")
	}
	hasAll, hasAny := strings.Contains(s, ","), strings.Contains(s, "?")
	if hasAll && hasAny {
		return nil, bad("',' (all of) and '?' (any of) cannot be mixed in one expression")
	}
	sep := ","
	if hasAny {
		sep = "?"
	}
	dep := &api.Dependency{Any: hasAny, Raw: s}
	for _, text := range strings.Split(s, sep) {
		clauses, why := parseClause(text)
		if why != "" {
			return nil, bad(why)
		}
		dep.Clauses = append(dep.Clauses, clauses...)
	}
	return dep, nil
}

// parseClause parses one TYPE:ID[+MIN][:ID...] clause into one clause per
// run of ids that share a delay.
func parseClause(text string) ([]api.DepClause, string) {
	if text == "" {
		return nil, "empty clause"
	}
	fields := strings.Split(text, ":")
	typ := strings.ToLower(fields[0])
	ids := fields[1:]
	if typ != "" && strings.TrimLeft(typ, "0123456789") == "" || strings.Contains(typ, "_") || strings.Contains(typ, "+") {
		// Legacy form: a list of job ids means afterany.
		typ, ids = "afterany", fields
	}
	known := false
	for _, t := range dependencyTypes {
		known = known || t == typ
	}
	if !known {
		return nil, fmt.Sprintf("unknown dependency type %q in %q", fields[0], text)
	}
	if typ == "singleton" {
		if len(ids) > 0 {
			return nil, fmt.Sprintf("singleton takes no job ids (got %q)", text)
		}
		return []api.DepClause{{Type: typ}}, ""
	}
	if len(ids) == 0 {
		return nil, fmt.Sprintf("%s needs at least one job id, e.g. %s:12", typ, typ)
	}
	var out []api.DepClause
	for _, field := range ids {
		id, delay, hasDelay := strings.Cut(field, "+")
		if !validJobID(id) {
			return nil, fmt.Sprintf("%q in %q is not a job id (use 12, or 12_3 for an array element)", id, text)
		}
		minutes := 0
		if hasDelay {
			if typ != "after" {
				return nil, fmt.Sprintf("only after takes a +minutes delay (got %q)", text)
			}
			n, err := strconv.Atoi(delay)
			if err != nil || n < 0 || strings.HasPrefix(delay, "+") || strings.HasPrefix(delay, "-") {
				return nil, fmt.Sprintf("delay %q in %q is not a whole number of minutes", delay, text)
			}
			minutes = n
		}
		if len(out) > 0 && out[len(out)-1].Minutes == minutes {
			out[len(out)-1].JobIDs = append(out[len(out)-1].JobIDs, id)
			continue
		}
		out = append(out, api.DepClause{Type: typ, JobIDs: []string{id}, Minutes: minutes})
	}
	return out, ""
}

// validJobID accepts "12" and "12_3" (api.ParseJobRef's forms).
func validJobID(s string) bool {
	_, err := api.ParseJobRef(s)
	return err == nil
}
