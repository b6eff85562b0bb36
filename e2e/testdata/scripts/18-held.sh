#!/bin/bash
# ------------------------------------------------------------------
# Example 18: submit a job held, and release it when you are ready:
#   scontrol release <jobid>
# ------------------------------------------------------------------
#SBATCH --job-name=waiting
#SBATCH --hold
#SBATCH --time=00:01:00
#SBATCH --output=waiting-%j.out

echo "released and ran"
