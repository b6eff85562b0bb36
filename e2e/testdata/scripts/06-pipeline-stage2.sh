#!/bin/bash
# ------------------------------------------------------------------
# Example 6b: the second stage: reads what stage 1 wrote.
# ------------------------------------------------------------------
#SBATCH --job-name=stage2
#SBATCH --time=00:05:00
#SBATCH --output=stage2-%j.out

echo "stage 2 read $(cat results.dat) at $(date +%s.%N)"
