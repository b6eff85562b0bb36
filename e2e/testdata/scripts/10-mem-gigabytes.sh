#!/bin/bash
# ------------------------------------------------------------------
# Example 10: memory for the whole job, in gigabytes.
# ------------------------------------------------------------------
#SBATCH --job-name=onegig
#SBATCH --mem=1G
#SBATCH --time=00:01:00
#SBATCH --output=onegig-%j.out

echo "mem_per_node=$SLURM_MEM_PER_NODE"
