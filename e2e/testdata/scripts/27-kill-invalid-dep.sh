#!/bin/bash
# ------------------------------------------------------------------
# Example 27: do not leave a job waiting forever on a job that failed:
#   sbatch --dependency=afterok:<failed> --kill-on-invalid-dep=yes 27-kill-invalid-dep.sh
# ------------------------------------------------------------------
#SBATCH --job-name=orphan
#SBATCH --time=00:01:00
#SBATCH --output=orphan-%j.out

echo "never runs"
