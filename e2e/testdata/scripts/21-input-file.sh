#!/bin/bash
# ------------------------------------------------------------------
# Example 21: a program that reads its parameters from standard input.
# -i connects the batch script's stdin to a file.
# ------------------------------------------------------------------
#SBATCH --job-name=stdin
#SBATCH --input=params.txt
#SBATCH --time=00:01:00
#SBATCH --output=stdin-%j.out

read -r alpha beta
echo "alpha=$alpha beta=$beta"
