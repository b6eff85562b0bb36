#!/bin/bash
# ------------------------------------------------------------------
# Example 11: all of a node's memory. --mem=0 gives the job every
# megabyte of the node it lands on (use the himem partition).
# ------------------------------------------------------------------
#SBATCH --job-name=allmem
#SBATCH --partition=himem
#SBATCH --mem=0
#SBATCH --time=00:01:00
#SBATCH --output=allmem-%j.out

echo "mem_per_node=$SLURM_MEM_PER_NODE node=$SLURMD_NODENAME"
