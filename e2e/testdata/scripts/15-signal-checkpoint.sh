#!/bin/bash
# ------------------------------------------------------------------
# Example 15: save your work before the time limit. Slurm sends SIGUSR1
# to the batch script 10 seconds before the limit; the trap writes a
# checkpoint and exits cleanly.
# ------------------------------------------------------------------
#SBATCH --job-name=ckpt
#SBATCH --time=00:00:15
#SBATCH --signal=B:USR1@10
#SBATCH --output=ckpt-%j.out

checkpoint() {
    echo "caught SIGUSR1 at $(date +%s), writing checkpoint"
    echo "state" > ckpt-$SLURM_JOB_ID.dat
    exit 0
}
trap checkpoint USR1
echo "computing"
sleep 60 &
wait
