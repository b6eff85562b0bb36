#!/bin/bash
# ------------------------------------------------------------------
# Example 7a: a job that fails (exit status 3).
# ------------------------------------------------------------------
#SBATCH --job-name=fragile
#SBATCH --time=00:01:00
#SBATCH --output=fragile-%j.out

echo "something went wrong" >&2
exit 3
