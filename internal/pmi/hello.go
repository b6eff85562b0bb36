package pmi

// HelloSource is an MPI hello world in C: every rank prints its rank, the
// size and its host, after a barrier all of them pass. The tests build it
// with the host's mpicc.
const HelloSource = `#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d of %d on %s\n", rank, size, host);
    MPI_Finalize();
    return 0;
}
`
