#!/bin/bash
# ------------------------------------------------------------------
# Example 14: software licenses. The cluster has one MATLAB license;
# a job that needs it says so, and waits (reason Licenses) while
# another job holds it.
# ------------------------------------------------------------------
#SBATCH --job-name=matlab-run
#SBATCH --licenses=matlab:1
#SBATCH --time=00:01:00
#SBATCH --output=matlab-%j.out

echo "start $(date +%s.%N)"
sleep 2
echo "end $(date +%s.%N)"
