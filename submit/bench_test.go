package submit

import (
	"testing"
)

// typicalScript is a batch script as users write them: a handful of
// directives, comments, then the commands.
const typicalScript = `#!/bin/bash
#SBATCH --job-name=train-resnet
#SBATCH --partition=gpu
#SBATCH --time=1-12:00:00
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --gres=gpu:a100:2
#SBATCH --output=logs/%x-%j.out
#SBATCH --error=logs/%x-%j.err
# Resubmit on node failure.
#SBATCH --requeue
#SBATCH --array=0-15%4
#SBATCH --dependency=afterok:1234

module load cuda/12.4
source ~/venv/bin/activate
python train.py --epochs 90 --shard "$SLURM_ARRAY_TASK_ID"
`

func BenchmarkParse(b *testing.B) {
	c := testContext(map[string]string{"train.sh": typicalScript})
	args := []string{"--parsable", "-A", "vision", "--export=ALL,OMP_NUM_THREADS=8", "train.sh", "--lr", "0.1"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(args, c); err != nil {
			b.Fatal(err)
		}
	}
}
