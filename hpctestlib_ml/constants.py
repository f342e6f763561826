"""Names shared by the suite: scales, launch modes, sizes, device peaks."""
import dataclasses


@dataclasses.dataclass(frozen=True)
class Scale:
    '''How many nodes a test case uses and how many ranks per node.

    ``procs_per_node=None`` means one rank per device of the partition (a
    whole node); on CPU partitions one rank per node.
    '''
    num_nodes: int
    procs_per_node: int = None


#: The scales every workload is parameterised over. A partition runs the
#: ones listed in its ``extras['scales']``, or, when it lists none, every
#: scale that fits ``extras['max_nodes']`` and its devices.
SCALES = {
    '1_proc': Scale(1, 1),
    '2_procs': Scale(1, 2),
    '1_node': Scale(1),
    '2_nodes': Scale(2),
    '4_nodes': Scale(4),
    '8_nodes': Scale(8),
    '16_nodes': Scale(16),
}

#: ``per_task``: the job launcher (srun, mpirun, local) starts one task per
#: rank; ranks come from the scheduler (SLURM_PROCID, ...).
#: ``torchrun``: the job launcher starts one task per node, which runs
#: ``torchrun`` with c10d rendezvous and forks the node's ranks.
LAUNCH_MODES = ('per_task', 'torchrun')

#: ``tiny``: a small model, few steps, runs anywhere (CPU CI);
#: ``short``: the benchmark's model, per-device batch and options for a few
#: minutes of steady state (nightly regression on GPU partitions);
#: ``benchmark``: the benchmark's own configuration (GPU partitions).
#: ``auto`` picks ``benchmark`` on partitions with the ``gpu`` feature.
SIZES = ('auto', 'tiny', 'short', 'benchmark')

#: Partition feature that marks GPU partitions.
GPU_FEATURE = 'gpu'

#: Dense peak FLOP/s per device by model and precision, from the vendors'
#: data sheets (tensor cores, no sparsity). ``fp32`` is the non-tensor-core
#: rate; ``tf32`` the tensor-core rate for fp32 inputs.
DEVICE_PEAK_FLOPS = {
    'A100': {'fp32': 19.5e12, 'tf32': 156e12, 'bf16': 312e12, 'fp16': 312e12},
    'H100-SXM': {'fp32': 67e12, 'tf32': 494.7e12, 'bf16': 989.4e12,
                 'fp16': 989.4e12},
    'H100-PCIe': {'fp32': 51.2e12, 'tf32': 378e12, 'bf16': 756e12,
                  'fp16': 756e12},
    'GH200': {'fp32': 67e12, 'tf32': 494.7e12, 'bf16': 989.4e12,
              'fp16': 989.4e12},
    'H200': {'fp32': 67e12, 'tf32': 494.7e12, 'bf16': 989.4e12,
             'fp16': 989.4e12},
    # One MI250 graphics compute die (a GCD is one device to PyTorch).
    'MI250-GCD': {'fp32': 23.95e12, 'tf32': 23.95e12, 'bf16': 181.05e12,
                  'fp16': 181.05e12},
    'MI300X': {'fp32': 163.4e12, 'tf32': 653.7e12, 'bf16': 1307.4e12,
               'fp16': 1307.4e12},
}

#: Which peak of :data:`DEVICE_PEAK_FLOPS` a training precision runs at.
#: (OpenCLIP and most trainers enable TF32 matmuls for fp32 on GPUs.)
PRECISION_PEAK = {
    'fp32': 'tf32',
    'tf32': 'tf32',
    'amp': 'fp16',
    'fp16': 'fp16',
    'pure_fp16': 'fp16',
    'amp_bf16': 'bf16',
    'amp_bfloat16': 'bf16',
    'bf16': 'bf16',
    'pure_bf16': 'bf16',
}

#: GPU vendor of each model in :data:`DEVICE_PEAK_FLOPS`: it chooses the
#: container runtime's GPU option (:data:`CONTAINER_GPU_OPTIONS`). A
#: partition's ``extras['gpu_vendor']`` says it for other models.
GPU_VENDORS = {
    'A100': 'nvidia', 'H100-SXM': 'nvidia', 'H100-PCIe': 'nvidia',
    'GH200': 'nvidia', 'H200': 'nvidia',
    'MI250-GCD': 'amd', 'MI300X': 'amd',
}

#: Apptainer's option that makes a vendor's GPUs and driver visible in the
#: container.
CONTAINER_GPU_OPTIONS = {'nvidia': '--nv', 'amd': '--rocm'}

#: The container platform the suite's images are built for (containers/).
CONTAINER_PLATFORM = 'Apptainer'

#: Frameworks with an image definition, ``containers/<framework>.def``.
FRAMEWORKS = ('pytorch', 'tensorflow')

#: Environment feature of the programming environment that container runs
#: use: the image brings the framework, the host only the runtime.
CONTAINER_FEATURE = 'container'
