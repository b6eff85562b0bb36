#!/bin/bash
# ------------------------------------------------------------------
# Example 7b: clean up after a failed job only:
#   sbatch --dependency=afternotok:<jobid> 07-cleanup-afternotok.sh
# ------------------------------------------------------------------
#SBATCH --job-name=cleanup
#SBATCH --time=00:01:00
#SBATCH --output=cleanup-%j.out

echo "cleaning up after a failure"
