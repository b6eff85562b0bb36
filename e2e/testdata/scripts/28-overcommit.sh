#!/bin/bash
# ------------------------------------------------------------------
# Example 28: many light tasks sharing one CPU (-O, --overcommit).
# ------------------------------------------------------------------
#SBATCH --job-name=light
#SBATCH --ntasks=8
#SBATCH --overcommit
#SBATCH --time=00:01:00
#SBATCH --output=light-%j.out

echo "ntasks=$SLURM_NTASKS cpus=$SLURM_CPUS_ON_NODE"
