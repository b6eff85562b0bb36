#!/bin/bash
# ------------------------------------------------------------------
# Example 9: memory per CPU. Two tasks of one CPU each, 200 MB per CPU:
# the job gets 400 MB on its node.
# ------------------------------------------------------------------
#SBATCH --job-name=permem
#SBATCH --ntasks=2
#SBATCH --mem-per-cpu=200M
#SBATCH --time=00:01:00
#SBATCH --output=permem-%j.out

echo "mem_per_node=$SLURM_MEM_PER_NODE ntasks=$SLURM_NTASKS cpus=$SLURM_CPUS_ON_NODE"
