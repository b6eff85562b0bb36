package api

import (
	"strconv"
	"strings"
)

// This file lays a job's tasks out over its nodes, the one arithmetic the
// scheduler (CPUs per node), the node daemons (SLURM_TASKS_PER_NODE,
// SLURM_NODEID) and the step launcher (which task runs where) share.

// TaskCounts returns the tasks on each of k nodes of a job with ntasks
// tasks in all (0: perNode on each node): split as evenly as possible, the
// first nodes taking one more, as Slurm balances -n over -N. Every node
// gets at least one task when ntasks ≥ k.
func TaskCounts(ntasks, perNode, k int) []int {
	if k < 1 {
		return nil
	}
	n := TasksOn(ntasks, perNode, k)
	out := make([]int, k)
	for i := range out {
		out[i] = n / k
		if i < n%k {
			out[i]++
		}
	}
	return out
}

// MostTasksPerNode returns the most tasks any of k nodes runs: what each
// node's share of the job is sized for.
func MostTasksPerNode(ntasks, perNode, k int) int {
	if k < 1 {
		return 0
	}
	n := TasksOn(ntasks, perNode, k)
	return (n + k - 1) / k
}

// TaskNodes returns, for each task rank, the index of the node it runs on:
// block fills a node's tasks before the next node's (ranks 0, 1 on node 0,
// 2, 3 on node 1), cyclic deals ranks out one node at a time (0 and 2 on
// node 0, 1 and 3 on node 1), each node up to its count.
func TaskNodes(counts []int, cyclic bool) []int {
	total := 0
	for _, c := range counts {
		total += c
	}
	out := make([]int, 0, total)
	if !cyclic {
		for node, c := range counts {
			for range c {
				out = append(out, node)
			}
		}
		return out
	}
	left := append([]int(nil), counts...)
	for len(out) < total {
		for node := range left {
			if left[node] > 0 {
				left[node]--
				out = append(out, node)
			}
		}
	}
	return out
}

// TasksPerNodeText writes task counts as Slurm's SLURM_TASKS_PER_NODE
// does: runs of equal counts as COUNT(xN), e.g. [2 2 2 1] is "2(x3),1".
func TasksPerNodeText(counts []int) string {
	var parts []string
	for i := 0; i < len(counts); {
		j := i + 1
		for j < len(counts) && counts[j] == counts[i] {
			j++
		}
		p := strconv.Itoa(counts[i])
		if j-i > 1 {
			p += "(x" + strconv.Itoa(j-i) + ")"
		}
		parts = append(parts, p)
		i = j
	}
	return strings.Join(parts, ",")
}
