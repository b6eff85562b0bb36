#!/bin/bash
# ------------------------------------------------------------------
# Example 20: get an e-mail when the job starts and when it ends.
# ------------------------------------------------------------------
#SBATCH --job-name=notify
#SBATCH --mail-type=BEGIN,END
#SBATCH --mail-user=researcher@example.org
#SBATCH --time=00:01:00
#SBATCH --output=notify-%j.out

echo "done"
