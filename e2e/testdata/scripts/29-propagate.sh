#!/bin/bash
# ------------------------------------------------------------------
# Example 29: take your shell's open-file limit (ulimit -n) to the job.
# ------------------------------------------------------------------
#SBATCH --job-name=limits
#SBATCH --propagate=NOFILE
#SBATCH --time=00:01:00
#SBATCH --output=limits-%j.out

echo "nofile=$(ulimit -S -n)"
