#!/bin/bash
# ------------------------------------------------------------------
# Example 22: pass a variable to the job, on top of your environment:
#   sbatch --export=ALL,SAMPLE=run42 22-export.sh
# ------------------------------------------------------------------
#SBATCH --job-name=exported
#SBATCH --time=00:01:00
#SBATCH --output=exported-%j.out

echo "SAMPLE=$SAMPLE HOME_SET=${HOME:+yes}"
