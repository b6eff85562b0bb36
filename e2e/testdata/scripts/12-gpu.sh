#!/bin/bash
# ------------------------------------------------------------------
# Example 12: one GPU. CUDA_VISIBLE_DEVICES names the GPU you got; your
# CUDA program sees only that one.
# ------------------------------------------------------------------
#SBATCH --job-name=gpu1
#SBATCH --partition=gpu
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=2
#SBATCH --mem=1G
#SBATCH --time=00:10:00
#SBATCH --output=gpu1-%j.out

echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES cpus=$SLURM_CPUS_ON_NODE"
