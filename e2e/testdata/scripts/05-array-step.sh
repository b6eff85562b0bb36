#!/bin/bash
# ------------------------------------------------------------------
# Example 5: an array with a step: indexes 0, 5 and 10 only.
# ------------------------------------------------------------------
#SBATCH --job-name=stepped
#SBATCH --array=0-10:5
#SBATCH --time=1
#SBATCH --output=stepped_%a.out

echo "index=$SLURM_ARRAY_TASK_ID step=$SLURM_ARRAY_TASK_STEP"
