package api

import (
	"strings"
	"testing"
)

func TestTRESBillingWeights(t *testing.T) {
	cases := []struct {
		in            string
		cpu, mem, gpu float64
	}{
		{"CPU=1.0,Mem=0.25G,GRES/gpu=10", 1, 0.25, 10},
		{"cpu=2,mem=0.001", 2, 1.024, 0},
		{"Mem=1T", 0, 1.0 / 1024, 0},
		{"GRES/gpu=4", 0, 0, 4},
		{"", 0, 0, 0},
	}
	for _, c := range cases {
		cfg := DefaultSchedConfig()
		if err := cfg.Set("TRESBillingWeights", c.in); err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if cfg.BillingCPU != c.cpu || cfg.BillingMem != c.mem || cfg.BillingGPU != c.gpu {
			t.Errorf("%q: cpu %v mem %v gpu %v, want %v %v %v", c.in, cfg.BillingCPU, cfg.BillingMem, cfg.BillingGPU, c.cpu, c.mem, c.gpu)
		}
		again := DefaultSchedConfig()
		if err := again.Set("TRESBillingWeights", cfg.TRESBillingWeights()); err != nil || again.BillingMem != cfg.BillingMem || again.BillingCPU != cfg.BillingCPU || again.BillingGPU != cfg.BillingGPU {
			t.Errorf("%q: written back as %q, which reads as %+v (%v)", c.in, cfg.TRESBillingWeights(), again, err)
		}
	}
	for in, want := range map[string]string{
		"CPU":             "not TRES=WEIGHT",
		"CPU=x":           "the weight of CPU",
		"GRES/gpu:h100=1": "not \"GRES/gpu:h100\"",
		"node=1":          "not \"node\"",
		"Mem=-1G":         "the weight of Mem",
	} {
		cfg := DefaultSchedConfig()
		if err := cfg.Set("TRESBillingWeights", in); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "TRESBillingWeights=") {
			t.Errorf("%q: %v, want an error naming the setting and %q", in, err, want)
		}
	}
}
