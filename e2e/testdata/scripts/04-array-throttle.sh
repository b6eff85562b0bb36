#!/bin/bash
# ------------------------------------------------------------------
# Example 4: a large array that should not flood the cluster.
# "%2" lets at most two tasks run at the same time; the rest wait with
# reason JobArrayTaskLimit.
# ------------------------------------------------------------------
#SBATCH --job-name=throttled
#SBATCH --array=0-5%2
#SBATCH --time=00:02:00
#SBATCH --mem=50M
#SBATCH --output=throttled_%a.out

echo "start $(date +%s.%N)"
sleep 2
echo "end $(date +%s.%N)"
