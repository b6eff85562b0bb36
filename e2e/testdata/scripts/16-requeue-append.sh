#!/bin/bash
# ------------------------------------------------------------------
# Example 16: a job that may be requeued (preempted, or a node lost)
# and continues where it stopped. --open-mode=append keeps the output
# of every run; SLURM_RESTART_COUNT says which run this is.
# ------------------------------------------------------------------
#SBATCH --job-name=resumable
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --time=00:05:00
#SBATCH --output=resumable-%j.out

echo "run $SLURM_RESTART_COUNT starting"
if [ "$SLURM_RESTART_COUNT" -eq 0 ]; then
    sleep 60
fi
echo "run $SLURM_RESTART_COUNT done"
