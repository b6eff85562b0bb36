package sched

import (
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// lic asks for count of license name.
func (b jobB) lic(name string, count int) jobB {
	return b.with(func(j *state.Job) { j.Spec.Licenses = append(j.Spec.Licenses, api.License{Name: name, Count: count}) })
}

// licenses sets the cluster's licenses.
func (sc *scene) licenses(ls ...api.License) *scene {
	sc.s.Config.Licenses = ls
	return sc
}

// TestScheduleLicenses: jobs start while the cluster's licenses last,
// counting what running (and suspended) jobs hold; a job that must wait
// for licenses gets reason Licenses and holds them, so a later job that
// would fit in what is left does not overtake it, while jobs asking for
// other licenses or none go on; a job waiting for CPUs keeps its licenses
// too.
func TestScheduleLicenses(t *testing.T) {
	matlab := api.License{Name: "matlab", Count: 4}
	fluent := api.License{Name: "fluent", Count: 1}
	runScenarios(t, map[string]scenario{
		"starts while the licenses last": {
			scene: at(t0).with(nodes(1).cpus(8)).licenses(matlab).
				queue(job(1).lic("matlab", 3), job(2).lic("matlab", 2), job(3).lic("matlab", 1)),
			starts:  []string{"1@n1"},
			reasons: map[uint64]api.Reason{2: api.ReasonLicenses, 3: api.ReasonLicenses},
		},
		"what running jobs hold is not free": {
			scene: at(t0).with(nodes(1).cpus(8)).licenses(matlab, fluent).
				running("n1", time.Minute, job(9).lic("matlab", 2).lic("fluent", 1)).
				queue(job(1).lic("matlab", 2), job(2).lic("fluent", 1), job(3).lic("matlab", 1), job(4)),
			starts:  []string{"1@n1", "4@n1"},
			reasons: map[uint64]api.Reason{2: api.ReasonLicenses, 3: api.ReasonLicenses},
		},
		"other licenses and none go on": {
			scene: at(t0).with(nodes(1).cpus(8)).licenses(matlab, fluent).
				queue(job(1).lic("matlab", 5), job(2).lic("fluent", 1), job(3)),
			starts:  []string{"2@n1", "3@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonLicenses},
		},
		"a job waiting for CPUs keeps its licenses": {
			scene: at(t0).with(node("n1").cpus(4).busy(4, 0)).licenses(matlab).
				queue(job(1).cpus(2).lic("matlab", 4), job(2).cpus(1).lic("matlab", 1), job(3).cpus(1)),
			reasons: map[uint64]api.Reason{1: api.ReasonResources, 2: api.ReasonLicenses, 3: api.ReasonPriority},
		},
	})
}
