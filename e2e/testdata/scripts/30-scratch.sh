#!/bin/bash
# ------------------------------------------------------------------
# Example 30: node-local scratch space. --tmp asks for a node whose
# local disk has that much free for this job; copy inputs there,
# work on them, and copy the results back before the job ends.
# ------------------------------------------------------------------
#SBATCH --job-name=scratch
#SBATCH --tmp=2G
#SBATCH --time=00:01:00
#SBATCH --output=scratch-%j.out

work=$(mktemp -d)
echo "input" > "$work/data"
echo "scratch on $SLURMD_NODENAME: $(cat "$work/data")"
rm -rf "$work"
