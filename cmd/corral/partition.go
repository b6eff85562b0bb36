package main

import (
	"context"
	"fmt"
	"strings"

	"corral/api"
	"corral/display"
)

// runPartition manages the replicated partitions: corral partition
// add|modify|delete|list, with scontrol's KEY=VALUE settings.
func runPartition(ctx context.Context, env *cliEnv, args []string) error {
	settings := "[" + strings.Join(api.PartitionKeys, "=... ") + "=...]"
	return runActions(ctx, env, "partition", []string{"add", "modify", "delete", "list"}, map[string]action{
		"add":    {"NAME " + settings, partitionAdd},
		"modify": {"NAME KEY=VALUE...", partitionModify},
		"delete": {"NAME", partitionDelete},
		"list":   {"[NAME...]", partitionList},
	}, args)
}

func partitionAdd(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return partitionPut(ctx, env, cmd, args, api.PartitionRequest{Create: true})
}

func partitionModify(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("%s: give a partition and KEY=VALUE settings, e.g. corral %s batch State=DRAIN MaxTime=2:00:00", cmd, cmd)
	}
	return partitionPut(ctx, env, cmd, args, api.PartitionRequest{})
}

func partitionDelete(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s: give one partition name", cmd)
	}
	return partitionPut(ctx, env, cmd, args, api.PartitionRequest{Delete: true})
}

// partitionPut sends a partition request: args are the name and its
// settings.
func partitionPut(ctx context.Context, env *cliEnv, cmd string, args []string, req api.PartitionRequest) error {
	if len(args) == 0 {
		return fmt.Errorf("%s: give a partition name", cmd)
	}
	req.Name = args[0]
	for _, a := range args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return fmt.Errorf("%s: %q is not KEY=VALUE (settings: %s)", cmd, a, strings.Join(api.PartitionKeys, ", "))
		}
		req.Settings = append(req.Settings, [2]string{k, v})
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	if err := cl.PutPartition(ctx, req); err != nil {
		return fmt.Errorf("%s %s: %w", cmd, req.Name, err)
	}
	return nil
}

func partitionList(ctx context.Context, env *cliEnv, cmd string, args []string) error {
	return showPartitions(ctx, env, args)
}

// showPartitions prints the partitions named (all when none) as scontrol
// show partition does.
func showPartitions(ctx context.Context, env *cliEnv, names []string) error {
	cl, err := env.client()
	if err != nil {
		return err
	}
	parts, err := cl.Partitions(ctx)
	if err != nil {
		return err
	}
	shown := 0
	for i := range parts {
		if len(names) > 0 && !containsFold(names, parts[i].Name) {
			continue
		}
		display.ShowPartition(env.stdout, &parts[i])
		fmt.Fprintln(env.stdout)
		shown++
	}
	if len(names) > 0 && shown == 0 {
		return fmt.Errorf("partition %s: no such partition", strings.Join(names, ", "))
	}
	return nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// updatePartition is scontrol update PartitionName=NAME KEY=VALUE...
func updatePartition(ctx context.Context, env *cliEnv, name string, settings []string) error {
	return partitionPut(ctx, env, "update", append([]string{name}, settings...), api.PartitionRequest{})
}
