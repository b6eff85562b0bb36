#!/bin/bash
# ------------------------------------------------------------------
# Example 8: only one job of this name runs at a time (for instance,
# jobs that update the same database). Submit it several times.
# ------------------------------------------------------------------
#SBATCH --job-name=db-update
#SBATCH --dependency=singleton
#SBATCH --time=00:01:00
#SBATCH --output=db-update-%j.out

echo "start $(date +%s.%N)"
sleep 2
echo "end $(date +%s.%N)"
