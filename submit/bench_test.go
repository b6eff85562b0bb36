package submit

import (
	"testing"

	"corral/api"
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

// BenchmarkValidateSpec measures the shared validation the controller runs
// on every job it receives: a plain job as the submit benchmarks send, and
// the typical script's job (array, dependency, GPUs) with an environment
// of 60 variables.
func BenchmarkValidateSpec(b *testing.B) {
	c := testContext(map[string]string{"train.sh": typicalScript})
	req, err := Parse([]string{"train.sh"}, c)
	if err != nil {
		b.Fatal(err)
	}
	full := req.Spec
	for i := 0; len(full.Env) < 60; i++ {
		full.Env = append(full.Env, "VAR_"+string(rune('A'+i%26))+string(rune('A'+i/26))+"=/usr/local/lib:/usr/lib:/opt/site/lib")
	}
	plain := goodSpec()
	plain.RequestID = "0123456789abcdef0123456789abcdef"
	for name, sp := range map[string]*api.JobSpec{"plain": &plain, "typical": &full} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := ValidateSpec(sp, validateNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
