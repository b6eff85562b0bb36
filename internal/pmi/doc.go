// Package pmi is the process-management interface srun offers a step's
// tasks, so that MPI programs find each other: the PMI-2 wire protocol
// (what Slurm's --mpi=pmi2 offers) and, for clients that speak the older
// one, the PMI-1 wire protocol, on one listener.
//
// A task learns where the server is and who it is from its environment
// (PMI_PORT=host:port, PMI_RANK, PMI_SIZE, PMI_JOBID; MPICH reads
// MPIR_CVAR_PMI_VERSION=2 to speak PMI-2). It connects, says which
// protocol it speaks, and then puts key-value pairs, waits at fences
// (barriers) until every rank has arrived, and gets the pairs the others
// put: the business cards MPI needs to connect its ranks. The server also
// answers the job attribute PMI_process_mapping, which tells MPI which
// ranks share a node, and keeps node attributes, which the ranks of one
// node share.
//
// The wires, as MPICH's client writes them:
//
//	PMI-1: "cmd=NAME key=value key=value\n"  (one line per message)
//	PMI-2: "%6d" length, then "cmd=NAME;key=value;...;"  (after an
//	       initial PMI-1 "cmd=init pmi_version=2 pmi_subversion=0")
//
// Every message and value is bounded (MaxMessage); a client that breaks
// the protocol loses its connection, never the server. A task that asks
// to abort (or a server that is closed) ends the step's fences with an
// error, so no rank waits for ever.
//
// It never starts processes and never reads the environment: srun
// creates a Server for each step, serves it on a listener and puts
// ServerEnv's variables in each task's environment.
//
// The entry points are NewServer, Server.Serve, Server.TaskEnv and
// ProcessMapping.
package pmi
