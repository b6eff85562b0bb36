#!/bin/bash
# ------------------------------------------------------------------
# Example 3: a job array. One script, four tasks; each task processes
# its own input, chosen with SLURM_ARRAY_TASK_ID.
# %A is the array's job id and %a the task's index.
# ------------------------------------------------------------------
#SBATCH --job-name=sweep
#SBATCH --array=1-4
#SBATCH --time=00:02:00
#SBATCH --mem=50M
#SBATCH --output=sweep_%A_%a.out

echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT (array $SLURM_ARRAY_JOB_ID, min $SLURM_ARRAY_TASK_MIN max $SLURM_ARRAY_TASK_MAX)"
