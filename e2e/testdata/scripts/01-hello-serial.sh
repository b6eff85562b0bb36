#!/bin/bash
# ------------------------------------------------------------------
# Example 1: a serial job.
# Submit with:   sbatch 01-hello-serial.sh
# The job prints where and when it ran. Output goes to hello-<jobid>.out
# in the directory you submitted from.
# ------------------------------------------------------------------
#SBATCH --job-name=hello
#SBATCH --ntasks=1
#SBATCH --time=00:05:00
#SBATCH --mem=100M
#SBATCH --output=hello-%j.out

echo "Hello from job $SLURM_JOB_ID ($SLURM_JOB_NAME) on $SLURMD_NODENAME"
echo "Started at $(date)"
echo "Working directory: $(pwd)"
