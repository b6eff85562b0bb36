package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// TRESBillingWeights is Slurm's way of writing the billing weights, as
// `corral config set TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=10`
// takes it: a weight per CPU, per unit of memory (MB unless the weight
// ends in K, M, G or T: per GB with G) and per GPU, each per second. It
// sets BillingWeightCPU, BillingWeightMem (kept per GiB) and
// BillingWeightGPU; a TRES it does not name weighs 0, as in Slurm. A
// run's billing is the sum of its TRES times their weights (Slurm's
// default, without PriorityFlags=MAX_TRES).
const tresBillingKey = "TRESBillingWeights"

// init adds the settings of the accounting work: TRESBillingWeights and
// AccountingRetention (seconds, or a Go duration such as 17520h).
func init() {
	configKeys[tresBillingKey] = setTRESBillingWeights
	configKeys["AccountingRetention"] = durField(func(c *SchedConfig) *int64 { return &c.AccountingRetention })
}

func setTRESBillingWeights(c *SchedConfig, v string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s=%s: %s (e.g. CPU=1.0,Mem=0.25G,GRES/gpu=10)", tresBillingKey, v, fmt.Sprintf(format, args...))
	}
	cpu, mem, gpu := 0.0, 0.0, 0.0
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, weight, ok := strings.Cut(item, "=")
		if !ok {
			return bad("%q is not TRES=WEIGHT", item)
		}
		scale := 1.0
		if strings.EqualFold(name, "mem") {
			// Slurm weighs memory per MB; a unit suffix weighs it per
			// that unit. corral keeps the weight per GiB.
			scale = 1024
			if n := len(weight); n > 0 {
				switch strings.ToUpper(weight[n-1:]) {
				case "K":
					scale, weight = 1024*1024, weight[:n-1]
				case "M":
					weight = weight[:n-1]
				case "G":
					scale, weight = 1, weight[:n-1]
				case "T":
					scale, weight = 1.0/1024, weight[:n-1]
				}
			}
		}
		w, err := strconv.ParseFloat(weight, 64)
		if err != nil || math.IsNaN(w) || w < 0 || w*scale > MaxBillingWeight {
			return bad("the weight of %s, %q, is not a number from 0 to %g", name, weight, float64(MaxBillingWeight))
		}
		switch strings.ToLower(name) {
		case "cpu":
			cpu = w
		case "mem":
			mem = w * scale
		case "gres/gpu":
			gpu = w
		default:
			return bad("corral bills CPU, Mem and GRES/gpu, not %q", name)
		}
	}
	c.BillingCPU, c.BillingMem, c.BillingGPU = cpu, mem, gpu
	return nil
}

// TRESBillingWeights writes c's billing weights as Slurm's
// TRESBillingWeights (memory per GB).
func (c SchedConfig) TRESBillingWeights() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return "CPU=" + f(c.BillingCPU) + ",Mem=" + f(c.BillingMem) + "G,GRES/gpu=" + f(c.BillingGPU)
}
