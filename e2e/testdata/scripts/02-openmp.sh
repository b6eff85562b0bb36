#!/bin/bash
# ------------------------------------------------------------------
# Example 2: a multi-threaded (OpenMP) program on one node.
# Ask for one task with several CPUs, and tell OpenMP how many threads
# to use from the number of CPUs Slurm gave you.
# ------------------------------------------------------------------
#SBATCH --job-name=omp
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --mem-per-cpu=100M
#SBATCH --time=0-00:10
#SBATCH --output=omp-%j.out

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
echo "OMP_NUM_THREADS=$OMP_NUM_THREADS cpus_on_node=$SLURM_CPUS_ON_NODE mem_per_node=$SLURM_MEM_PER_NODE"
