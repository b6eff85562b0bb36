package main

import (
	"context"
	"fmt"
	"strings"

	"corral/api"
)

// updateNode is `corral node update NAME Features=a,b` and scontrol's
// `update NodeName=NAME Features=a,b` (also AvailableFeatures= and
// ActiveFeatures=, which corral does not tell apart): the node's features
// in place of those its daemon reports, "Features=" for none. reset gives
// them back to the daemon's report.
func updateNode(ctx context.Context, env *cliEnv, node string, pairs []string, reset bool) error {
	req := api.NodeFeaturesRequest{Node: node, Reset: reset}
	set := false
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		switch {
		case !ok:
			return fmt.Errorf("node update: %q is not KEY=VALUE (keys: Features)", p)
		case strings.EqualFold(k, "Features") || strings.EqualFold(k, "AvailableFeatures") || strings.EqualFold(k, "ActiveFeatures"):
			req.Features, set = splitFeatures(v), true
		default:
			return fmt.Errorf("node update: %s is not a node field update can change (keys: Features; drain and resume with corral node drain|resume)", k)
		}
	}
	if set == reset {
		return fmt.Errorf("node update %s: give Features=a,b (Features= for none), or --reset-features", node)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	return cl.SetNodeFeatures(ctx, req)
}

// splitFeatures splits a comma-separated feature list; "" is none.
func splitFeatures(v string) []string {
	out := []string{}
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
