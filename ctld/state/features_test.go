package state

import (
	"slices"
	"testing"
	"time"

	"corral/api"
)

func init() {
	applyTests[CmdSetNodeFeatures] = func(t *testing.T) {
		r, next := scene(t)
		s := r.s
		next(CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "f1", CPUs: 2, MemMB: 4096, BootID: "bf",
			Features: []string{"intel", "ib", "intel"}}})
		reported := slices.Clone(s.Nodes["f1"].ActiveFeatures())
		set := next(CmdSetNodeFeatures, &SetNodeFeatures{Node: "f1", Features: []string{"gpu", "amd"}, By: "oscar"})
		afterSet := slices.Clone(s.Nodes["f1"].ActiveFeatures())
		// A restarted daemon reports its own again; the operator's stay.
		next(CmdRegisterNode, &RegisterNode{Now: t0.Add(time.Minute), Info: api.NodeInfo{Name: "f1", CPUs: 2, MemMB: 4096, BootID: "bf2",
			Features: []string{"intel"}}})
		afterRestart := slices.Clone(s.Nodes["f1"].ActiveFeatures())
		none := next(CmdSetNodeFeatures, &SetNodeFeatures{Node: "f1", By: "oscar"})
		afterNone := len(s.Nodes["f1"].ActiveFeatures())
		next(CmdSetNodeFeatures, &SetNodeFeatures{Node: "f1", Reset: true, By: "oscar"})
		unknown, _ := next(CmdSetNodeFeatures, &SetNodeFeatures{Node: "n9", Features: []string{"x"}}).(error)
		expect(t, map[string][2]any{
			"reported, sorted, once":        {slices.Equal(reported, []string{"ib", "intel"}), true},
			"set":                           {set, nil},
			"the operator's, sorted":        {slices.Equal(afterSet, []string{"amd", "gpu"}), true},
			"by":                            {s.Nodes["f1"].OpFeaturesBy, ""},
			"kept over a restart":           {slices.Equal(afterRestart, []string{"amd", "gpu"}), true},
			"none is a list too":            {none == nil && afterNone == 0, true},
			"reset gives the daemon's back": {slices.Equal(s.Nodes["f1"].ActiveFeatures(), []string{"intel"}), true},
			"HasFeature":                    {s.Nodes["f1"].HasFeature("intel") && !s.Nodes["f1"].HasFeature("gpu"), true},
			"an unknown node is refused":    {unknown != nil, true},
		})
	}
}
