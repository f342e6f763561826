#!/bin/bash
#SBATCH --job-name="rfm_MMoCLIPContainer_<hash>"
#SBATCH --ntasks=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=96
#SBATCH --output=rfm_job.out
#SBATCH --error=rfm_job.err
#SBATCH --time=2:15:0
#SBATCH --exclusive
#SBATCH --partition=booster
#SBATCH --account=jscbenchmark
#SBATCH --gres=gpu:4
export NCCL_SOCKET_IFNAME=ib0
export GLOO_SOCKET_IFNAME=ib0
export NCCL_IB_TIMEOUT=50
export NCCL_IB_RETRY_CNT=10
export UCX_RC_TIMEOUT=4s
export PYTHONPATH=$REPO/src${PYTHONPATH:+:$PYTHONPATH}
export HPCML_DEVICE_KIND=gpu
export HPCML_GPUS_PER_NODE=4
export NCCL_DEBUG=${NCCL_DEBUG:-INFO}
export NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET}
export HPCML_HANG_BOUND_S=120
export HPCML_HANG_DIR=$VAR/stage/juwels-booster/booster/container/MMoCLIPContainer_<hash>/hpcml_hang
export TORCH_NCCL_TRACE_BUFFER_SIZE=${TORCH_NCCL_TRACE_BUFFER_SIZE:-2000}
export TORCH_NCCL_DUMP_ON_TIMEOUT=${TORCH_NCCL_DUMP_ON_TIMEOUT:-1}
export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$VAR/stage/juwels-booster/booster/container/MMoCLIPContainer_<hash>/hpcml_nccl_trace_rank_
export HPCML_PROVENANCE_PACKAGES=open-clip-torch
export HPCML_RENDEZVOUS_ADDRESS='{hostname}i'
hpcml_first_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export HPCML_RENDEZVOUS_NODE="$hpcml_first_node"
export MASTER_ADDR=$($REPO/src/node_address.sh "$hpcml_first_node")
export MASTER_PORT=$(( 20000 + ${SLURM_JOB_ID} % 10000 ))
export OMP_NUM_THREADS=24
[ -r /p/project/jscbenchmark/hpcml/images/pytorch.sif ] || { echo "hpcml: container image /p/project/jscbenchmark/hpcml/images/pytorch.sif not found: put it where Apptainer finds it on the nodes (docs/guide/containers.md), or set -S container_image=" >&2; exit 1; }
srun --cpus-per-task=96 --kill-on-bad-exit=1 apptainer exec -B"$REPO:$REPO" -B"$VAR/stage/juwels-booster/booster/container/MMoCLIPContainer_<hash>:$VAR/stage/juwels-booster/booster/container/MMoCLIPContainer_<hash>" --pwd $VAR/stage/juwels-booster/booster/container/MMoCLIPContainer_<hash> --nv /p/project/jscbenchmark/hpcml/images/pytorch.sif $REPO/src/task_env.sh torchrun python3 -u -m torch.distributed.run --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT --rdzv-id=${SLURM_JOB_ID} --max-restarts=0 -m clip_train -- --dataset-type synthetic --train-num-samples 3200000 --epochs 1 --batch-size=512 --model ViT-L-14 --local-loss --gather-with-grad --grad-checkpointing --log-every-n-steps 1 --workers 24 --device cuda --precision amp --dist-url env:// --save-frequency 0 --report-to '' --logs logs --name=clip-${SLURM_JOB_ID}
