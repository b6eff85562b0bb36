#!/bin/bash
# ------------------------------------------------------------------
# Example 25: run inside the reservation made for the training course.
# ------------------------------------------------------------------
#SBATCH --job-name=training
#SBATCH --partition=training
#SBATCH --reservation=training
#SBATCH --time=00:01:00
#SBATCH --output=training-%j.out

echo "node=$SLURMD_NODENAME"
