#!/bin/bash
# ------------------------------------------------------------------
# Example 19: start no earlier than a given time.
# ------------------------------------------------------------------
#SBATCH --job-name=later
#SBATCH --begin=now+3
#SBATCH --time=00:01:00
#SBATCH --output=later-%j.out

echo "started at $(date +%s)"
