#!/bin/sh
# Map the job launcher's per-task ids to torch.distributed's env:// variables
# (RANK, LOCAL_RANK, WORLD_SIZE), then exec the program given as arguments.
# Used by the suite's per_task launch mode: srun (Slurm), mpirun (Open MPI),
# other PMI launchers, or a single local task (rank 0 of 1).
export RANK="${RANK:-${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}}}"
export LOCAL_RANK="${LOCAL_RANK:-${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}}}"
export WORLD_SIZE="${WORLD_SIZE:-${SLURM_NTASKS:-${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-1}}}}"
exec "$@"
