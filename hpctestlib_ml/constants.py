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
#: data sheets (no sparsity: the sheets' starred figures halved).
#:
#: ``fp32``: the rate of fp32 matrix products without TF32: NVIDIA's CUDA
#: cores (their tensor cores take no fp32 inputs), AMD's matrix cores
#: (MFMA fp32, which is what rocBLAS runs fp32 GEMMs on: twice the vector
#: rate on MI250). ``tf32``: NVIDIA's tensor cores on fp32 inputs (Ampere
#: on), MI300X's xf32. ``bf16``/``fp16``: tensor/matrix cores. A model
#: without ``bf16`` (V100) has no bf16 hardware: the suite runs fp16 there.
#:
#: Sources: NVIDIA A100 (40/80 GB) data sheet; H100 SXM/PCIe/NVL and H200
#: SXM/NVL product pages (the NVL figures are per GPU: 60 TF fp32, 835 TF
#: tf32 and 1,671 TF bf16 with sparsity); GH200 (its H100: as H100 SXM);
#: V100 SXM2 and PCIe data sheet; AMD Instinct MI250X and MI250 (per OAM,
#: two GCDs: halved here, a GCD is one device to PyTorch; MI250X 47.9 TF
#: vector fp32, 95.7 TF matrix fp32, 383 TF bf16; MI250 45.3, 90.5, 362.1)
#: and MI300X (163.4 TF fp32 matrix, 653.7 TF tf32, 1,307.4 TF bf16).
DEVICE_PEAK_FLOPS = {
    'A100': {'fp32': 19.5e12, 'tf32': 156e12, 'bf16': 312e12, 'fp16': 312e12},
    'H100-SXM': {'fp32': 67e12, 'tf32': 494.7e12, 'bf16': 989.4e12,
                 'fp16': 989.4e12},
    'H100-PCIe': {'fp32': 51.2e12, 'tf32': 378e12, 'bf16': 756e12,
                  'fp16': 756e12},
    'H100-NVL': {'fp32': 60e12, 'tf32': 417.5e12, 'bf16': 835.5e12,
                 'fp16': 835.5e12},
    'GH200': {'fp32': 67e12, 'tf32': 494.7e12, 'bf16': 989.4e12,
              'fp16': 989.4e12},
    'H200': {'fp32': 67e12, 'tf32': 494.7e12, 'bf16': 989.4e12,
             'fp16': 989.4e12},
    'H200-NVL': {'fp32': 60e12, 'tf32': 417.5e12, 'bf16': 835.5e12,
                 'fp16': 835.5e12},
    'V100': {'fp32': 15.7e12, 'fp16': 125e12},
    'V100-PCIe': {'fp32': 14e12, 'fp16': 112e12},
    # One graphics compute die (GCD) of an MI250X / MI250.
    'MI250X-GCD': {'fp32': 47.85e12, 'bf16': 191.5e12, 'fp16': 191.5e12},
    'MI250-GCD': {'fp32': 45.25e12, 'bf16': 181.05e12, 'fp16': 181.05e12},
    'MI300X': {'fp32': 163.4e12, 'tf32': 653.7e12, 'bf16': 1307.4e12,
               'fp16': 1307.4e12},
}

#: Memory of one device in GiB by model key of :data:`DEVICE_PEAK_FLOPS`,
#: where the model has one size (data sheets: H100 SXM and PCIe 80 GB, H100
#: NVL 94 GB, H200 SXM and NVL 141 GB, MI250X/MI250 128 GB per OAM: 64 per
#: GCD, MI300X 192 GB; nominal sizes, read as GiB: an H100 SXM's
#: nvidia-smi memory.total is 81559 MiB, 79.6 GiB, and the fit check's
#: reserve, :data:`hpctestlib_ml.memory_estimate.RESERVE_FRACTION`, covers
#: the difference). A model that comes in more than one size is in
#: :data:`DEVICE_MEMORY_SIZES` instead: its partition says which in
#: ``extras['device_memory_gib']`` (which overrides this table anyway).
DEVICE_MEMORY_GIB = {
    'H100-SXM': 80, 'H100-PCIe': 80, 'H100-NVL': 94, 'H200': 141,
    'H200-NVL': 141, 'MI250X-GCD': 64, 'MI250-GCD': 64, 'MI300X': 192,
}

#: The sizes, in GB, of the models of :data:`DEVICE_PEAK_FLOPS` that come
#: in more than one (data sheets: A100 40 or 80 GB, V100 16 or 32 GB,
#: GH200 96 GB HBM3 or 144 GB HBM3e): the suite cannot tell which a
#: partition has, so a batch partition of them declares
#: ``extras['device_memory_gib']`` or does not load
#: (:func:`hpctestlib_ml.siteconfig.check_site`). Guessing the larger
#: would queue cases that die out of memory on the smaller; the smaller,
#: skip cases the larger runs.
DEVICE_MEMORY_SIZES = {
    'A100': (40, 80), 'V100': (16, 32), 'V100-PCIe': (16, 32),
    'GH200': (96, 144),
}

#: What a site should know of a model key beside its figures (the
#: settings reference's table of GPU models shows it; a refused model
#: that matches the key says it).
GPU_MODEL_NOTES = {
    'A100': ('the SXM4 and PCIe boards alike: the data sheet gives both '
             'the same peaks'),
    'GH200': "the Grace Hopper superchip's H100 (as H100-SXM)",
    'MI250X-GCD': ('one of the two compute dies (GCDs) of an MI250X: ROCm '
                   'and Slurm count each as a GPU, so a node of 4 MI250X '
                   'has 8 devices'),
    'MI250-GCD': ('one of the two compute dies (GCDs) of an MI250: count '
                  '2 devices per MI250'),
    'MI300X': 'one OAM (one device to ROCm, unless partitioned)',
}

#: Product names (as ``nvidia-smi``, ``amd-smi``, ``rocm-smi`` and
#: ``torch.cuda.get_device_name`` print them) -> keys of
#: :data:`DEVICE_PEAK_FLOPS`: the first pattern contained in the name wins,
#: so the longer names come first ("H100 NVL" and "H100 PCIe" before
#: "H100", "GH200" and "H200 NVL" before "H200", "MI250X" before "MI250").
GPU_PRODUCT_NAMES = (
    ('GH200', 'GH200'), ('H200 NVL', 'H200-NVL'), ('H200', 'H200'),
    ('H100 NVL', 'H100-NVL'), ('H100 PCIe', 'H100-PCIe'),
    ('H100', 'H100-SXM'), ('A100', 'A100'),
    ('V100-PCIE', 'V100-PCIe'), ('V100', 'V100'),
    # An MI250(X) shows as two devices, one per compute die.
    ('MI300X', 'MI300X'), ('MI250X', 'MI250X-GCD'), ('MI250', 'MI250-GCD'),
)

#: Which peak of :data:`DEVICE_PEAK_FLOPS` a training precision runs at,
#: as the programs name their precisions. fp32 runs at ``fp32``, or at
#: ``tf32`` where the program's ``device`` record says TF32 was on
#: (:func:`hpctestlib_ml.peaks.peak_key`).
PRECISION_PEAK = {
    'fp32': 'fp32',
    'tf32': 'tf32',
    'amp': 'fp16',
    'fp16': 'fp16',
    'pure_fp16': 'fp16',
    'amp_bf16': 'bf16',
    'amp_bfloat16': 'bf16',
    'bf16': 'bf16',
    'pure_bf16': 'bf16',
}

#: The fp16 precision that stands in for a bf16 one on devices without
#: bf16 hardware (V100), by the programs' names.
FP16_FOR_BF16 = {'bf16': 'fp16', 'amp_bf16': 'amp', 'amp_bfloat16': 'amp',
                 'pure_bf16': 'pure_fp16'}

#: GPU vendor of each model in :data:`DEVICE_PEAK_FLOPS`: it chooses the
#: container runtime's GPU options
#: (:data:`hpctestlib_ml.container_launch.GPU_OPTIONS`). A partition's
#: ``extras['gpu_vendor']`` says it for other models.
GPU_VENDORS = {
    'A100': 'nvidia', 'H100-SXM': 'nvidia', 'H100-PCIe': 'nvidia',
    'H100-NVL': 'nvidia', 'GH200': 'nvidia', 'H200': 'nvidia',
    'H200-NVL': 'nvidia', 'V100': 'nvidia', 'V100-PCIe': 'nvidia',
    'MI250X-GCD': 'amd', 'MI250-GCD': 'amd', 'MI300X': 'amd',
}

#: Compute capability of each NVIDIA model in :data:`DEVICE_PEAK_FLOPS`
#: (CUDA's ``major.minor``, as ``torch.cuda.get_device_capability`` gives
#: it: Volta 7.0, Ampere 8.0, Hopper 9.0): with the vendor, what the
#: programs' rule of bf16 hardware reads (``src/device_choice.py``'s
#: ``bf16_native``; :func:`hpctestlib_ml.peaks.has_bf16`).
GPU_CAPABILITIES = {
    'A100': (8, 0), 'H100-SXM': (9, 0), 'H100-PCIe': (9, 0),
    'H100-NVL': (9, 0), 'GH200': (9, 0), 'H200': (9, 0), 'H200-NVL': (9, 0),
    'V100': (7, 0), 'V100-PCIe': (7, 0),
}

#: The framework's backend of each vendor's GPUs (``torch.version.hip``
#: set: ``hip``).
GPU_BACKENDS = {'nvidia': 'cuda', 'amd': 'hip'}

#: Frameworks a site names an image for (``extras['container_images']``);
#: the suite's own image (``make image``) has both.
FRAMEWORKS = ('pytorch', 'tensorflow')

#: The container platforms the ``*Container`` checks launch with, by the
#: names a site config gives (``container_platforms``,
#: ``HPCML_CONTAINER_PLATFORM``); how each starts a run:
#: :data:`hpctestlib_ml.container_launch.PLATFORMS`.
CONTAINER_PLATFORMS = ('Apptainer', 'Podman', 'PodmanHPC', 'Pyxis',
                       'ContainerEngine', 'Sarus', 'Singularity')

#: Environment feature of the programming environment that container runs
#: use: the image brings the framework, the host only the runtime.
CONTAINER_FEATURE = 'container'

#: glibc malloc settings for programs on CPU partitions: keep freed memory
#: in the process instead of giving every large block back to the system.
#: glibc serves each block over 32 MiB with its own mmap and unmaps it on
#: free, so a training step that makes and frees gigabyte activations
#: faults every page of them in again, each step (CosmoFlow's reference
#: size: 4.4 s a step with glibc's defaults, 3.0-3.1 s with these, on a
#: 2-core VM; bench/README.md). TensorFlow's allocator and PyTorch's CUDA
#: caching allocator keep their memory for the same reason; Intel's
#: PyTorch CPU tuning guide preloads jemalloc or tcmalloc instead. The
#: price is the same as theirs: memory stays with the process and the heap
#: fragments (CosmoFlow's reference step: peak resident 3.4 GB with
#: glibc's defaults, 4.8 GB in one probe with these; the CPU memory factor
#: of :mod:`hpctestlib_ml.memory_estimate` was measured without them).
#: Logged with every result (``env_switches``); a site's own values win,
#: ``MALLOC_MMAP_MAX_=65536`` restores glibc's default.
CPU_ALLOCATOR_ENV = {
    'MALLOC_MMAP_MAX_': '0',
    'MALLOC_TRIM_THRESHOLD_': '2147483647',
}

#: The directory, in a case's stage directory beside the job's output,
#: where the hang watch keeps its ranks' stacks and reports
#: (``src/hang_watch.py``); it exists only where a case hung.
HANG_DIR = 'hpcml_hang'

#: Where, in a GPU case's stage directory, PyTorch's flight recorder
#: dumps each rank's last NCCL collectives (``<prefix><rank>``) when
#: NCCL's watchdog times one out.
NCCL_TRACE_PREFIX = 'hpcml_nccl_trace_rank_'
