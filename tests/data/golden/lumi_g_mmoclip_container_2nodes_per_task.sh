#!/bin/bash
#SBATCH --job-name="rfm_MMoCLIPContainer_<hash>"
#SBATCH --ntasks=16
#SBATCH --ntasks-per-node=8
#SBATCH --cpus-per-task=7
#SBATCH --output=rfm_job.out
#SBATCH --error=rfm_job.err
#SBATCH --time=1:12:30
#SBATCH --exclusive
#SBATCH --partition=standard-g
#SBATCH --mem=480G
#SBATCH --account=proj1
#SBATCH --gpus-per-node=8
module use /appl/local/laifs/modules
module load lumi-aif-singularity-bindings
export PYTHONPATH=$REPO/src${PYTHONPATH:+:$PYTHONPATH}
export HPCML_DEVICE_KIND=gpu
export HPCML_GPUS_PER_NODE=8
export LOCAL_WORLD_SIZE=8
export NCCL_DEBUG=${NCCL_DEBUG:-INFO}
export NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET}
export HPCML_HANG_BOUND_S=120
export HPCML_HANG_DIR=$VAR/stage/lumi/standard-g/container/MMoCLIPContainer_<hash>/hpcml_hang
export TORCH_NCCL_TRACE_BUFFER_SIZE=${TORCH_NCCL_TRACE_BUFFER_SIZE:-2000}
export TORCH_NCCL_DUMP_ON_TIMEOUT=${TORCH_NCCL_DUMP_ON_TIMEOUT:-1}
export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$VAR/stage/lumi/standard-g/container/MMoCLIPContainer_<hash>/hpcml_nccl_trace_rank_
export HPCML_PROVENANCE_PACKAGES=open-clip-torch
export HPCML_RENDEZVOUS_ADDRESS='{hostname}'
hpcml_first_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export HPCML_RENDEZVOUS_NODE="$hpcml_first_node"
export MASTER_ADDR=$($REPO/src/node_address.sh "$hpcml_first_node")
export MASTER_PORT=$(( 20000 + ${SLURM_JOB_ID} % 10000 ))
export OMP_NUM_THREADS=7
[ -r /scratch/project_465000000/hpcml/hpcml-rocm.sif ] || { echo "hpcml: container image /scratch/project_465000000/hpcml/hpcml-rocm.sif not found: put it where Singularity finds it on the nodes (docs/guide/containers.md), or set -S container_image=" >&2; exit 1; }
srun --cpus-per-task=7 --kill-on-bad-exit=1 --cpu-bind=mask_cpu:0x00fe000000000000,0xfe00000000000000,0x0000000000fe0000,0x00000000fe000000,0x00000000000000fe,0x000000000000fe00,0x000000fe00000000,0x0000fe0000000000 singularity exec -B"$REPO:$REPO" -B"$VAR/stage/lumi/standard-g/container/MMoCLIPContainer_<hash>:$VAR/stage/lumi/standard-g/container/MMoCLIPContainer_<hash>" --pwd $VAR/stage/lumi/standard-g/container/MMoCLIPContainer_<hash> /scratch/project_465000000/hpcml/hpcml-rocm.sif $REPO/src/task_env.sh per_task python3 -u -m clip_train --dataset-type synthetic --train-num-samples 3200000 --epochs 1 --batch-size=512 --model ViT-L-14 --local-loss --gather-with-grad --grad-checkpointing --log-every-n-steps 1 --workers 7 --device cuda --precision amp --dist-url env:// --save-frequency 0 --report-to '' --logs logs --name=clip-${SLURM_JOB_ID}
