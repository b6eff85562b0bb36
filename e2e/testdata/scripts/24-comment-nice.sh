#!/bin/bash
# ------------------------------------------------------------------
# Example 24: be nice to your colleagues (lower your priority) and leave
# a note on the job that squeue and scontrol show.
# ------------------------------------------------------------------
#SBATCH --job-name=background
#SBATCH --nice=50
#SBATCH --comment="low priority rerun"
#SBATCH --qos=normal
#SBATCH --time=00:01:00
#SBATCH --output=background-%j.out

echo "qos=$SLURM_JOB_QOS"
