#!/bin/bash
# ------------------------------------------------------------------
# Example 17: results are only useful before a deadline. A job that can
# no longer finish by then is removed from the queue (state DEADLINE).
#   sbatch --deadline=now+30seconds 17-deadline.sh
# ------------------------------------------------------------------
#SBATCH --job-name=conference
#SBATCH --time=2:00:00
#SBATCH --output=conference-%j.out

echo "this would take two hours"
