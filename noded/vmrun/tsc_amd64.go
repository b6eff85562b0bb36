package vmrun

// haveRDTSC says whether this build can read the time-stamp counter.
const haveRDTSC = true

// rdtsc returns the CPU's time-stamp counter (the RDTSC instruction).
func rdtsc() uint64
