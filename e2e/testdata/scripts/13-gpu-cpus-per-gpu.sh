#!/bin/bash
# ------------------------------------------------------------------
# Example 13: two GPUs with four CPU cores for each of them, for data
# loaders: --cpus-per-gpu instead of counting CPUs yourself.
# ------------------------------------------------------------------
#SBATCH --job-name=gpu2
#SBATCH --partition=gpu
#SBATCH --gpus=2
#SBATCH --cpus-per-gpu=4
#SBATCH --mem=2G
#SBATCH --time=00:10:00
#SBATCH --output=gpu2-%j.out

echo "gpus=$CUDA_VISIBLE_DEVICES cpus=$SLURM_CPUS_ON_NODE"
