#!/bin/bash
#SBATCH --job-name="rfm_MMoCLIP_<hash>"
#SBATCH --ntasks=8
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH --output=rfm_job.out
#SBATCH --error=rfm_job.err
#SBATCH --time=2:15:0
#SBATCH --exclusive
#SBATCH --constraint=gpu
#SBATCH --qos=regular
#SBATCH --account=proj1
#SBATCH --gpus-per-node=4
export NCCL_SOCKET_IFNAME=hsn
export NCCL_CROSS_NIC=1
export FI_CXI_DISABLE_HOST_REGISTER=1
module load pytorch
export PYTHONPATH=$REPO/src${PYTHONPATH:+:$PYTHONPATH}
export HPCML_DEVICE_KIND=gpu
export HPCML_GPUS_PER_NODE=4
export LOCAL_WORLD_SIZE=4
export NCCL_DEBUG=${NCCL_DEBUG:-INFO}
export NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET}
export HPCML_HANG_BOUND_S=120
export HPCML_HANG_DIR=$VAR/stage/perlmutter/gpu/pytorch/MMoCLIP_<hash>/hpcml_hang
export TORCH_NCCL_TRACE_BUFFER_SIZE=${TORCH_NCCL_TRACE_BUFFER_SIZE:-2000}
export TORCH_NCCL_DUMP_ON_TIMEOUT=${TORCH_NCCL_DUMP_ON_TIMEOUT:-1}
export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$VAR/stage/perlmutter/gpu/pytorch/MMoCLIP_<hash>/hpcml_nccl_trace_rank_
export HPCML_PROVENANCE_PACKAGES=open-clip-torch
export HPCML_RENDEZVOUS_ADDRESS='{hostname}'
hpcml_first_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export HPCML_RENDEZVOUS_NODE="$hpcml_first_node"
export MASTER_ADDR=$($REPO/src/node_address.sh "$hpcml_first_node")
export MASTER_PORT=$(( 20000 + ${SLURM_JOB_ID} % 10000 ))
export OMP_NUM_THREADS=32
srun --cpus-per-task=32 --kill-on-bad-exit=1 --cpu-bind=cores $REPO/src/task_env.sh per_task python3 -u -m clip_train --dataset-type synthetic --train-num-samples 3200000 --epochs 1 --batch-size=512 --model ViT-L-14 --local-loss --gather-with-grad --grad-checkpointing --log-every-n-steps 1 --workers 32 --device cuda --precision amp --dist-url env:// --save-frequency 0 --report-to '' --logs logs --name=clip-${SLURM_JOB_ID}
