#!/bin/bash
# ------------------------------------------------------------------
# Example 26: what happens when a job runs past its time limit: it is
# stopped and ends TIMEOUT.
# ------------------------------------------------------------------
#SBATCH --job-name=overrun
#SBATCH --time=0:05
#SBATCH --output=overrun-%j.out

echo "starting a long computation"
sleep 120
echo "never printed"
