#!/bin/bash
# ------------------------------------------------------------------
# Example 6a: the first stage of a pipeline. It writes results.dat.
# Submit stage 2 to run only if this one succeeds:
#   jid=$(sbatch --parsable 06-pipeline-stage1.sh)
#   sbatch --dependency=afterok:$jid 06-pipeline-stage2.sh
# ------------------------------------------------------------------
#SBATCH --job-name=stage1
#SBATCH --time=00:05:00
#SBATCH --output=stage1-%j.out

sleep 1
echo 42 > results.dat
echo "stage 1 done at $(date +%s.%N)"
