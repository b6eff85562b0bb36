#!/bin/bash
# ------------------------------------------------------------------
# Example 23: run in a sub-directory and keep errors apart from output.
# ------------------------------------------------------------------
#SBATCH --job-name=tidy
#SBATCH --chdir=run-dir
#SBATCH --output=out-%x-%j.txt
#SBATCH --error=err-%x-%j.txt
#SBATCH --time=00:01:00

echo "in $(basename "$(pwd)")"
echo "a warning" >&2
