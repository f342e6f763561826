"""The pattern tables of triage: one per category, each pattern with the
real message it matches and where that message comes from, and the order
a line is classified in (:data:`ORDER`)."""
import re

from hpctestlib_ml import answers

#: The categories, in the order of the docs' table of them.
CATEGORIES = ('out_of_memory', 'communication', 'hardware', 'filesystem',
              'scheduler', 'numerics', 'software', 'bad_input', 'hang')

#: The categories only the suite's own lines give (no public log has
#: them): ``hang``, the hang watch's (``src/hang_watch.py``).
OWN_CATEGORIES = ('hang',)


# The pattern tables: one per category; each pattern with the real message
# it matches and where that message comes from.

#: hardware: the GPU or the node failed under the job.
HARDWARE = [re.compile(p) for p in (
    # NVIDIA's kernel driver, in dmesg or a site's epilog: "NVRM: Xid
    # (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s
    # of waiting for RPC response from GPU4 GSP!" (leptonai/gpud testdata
    # dmesg-with-xid-119.log); "kernel: NVRM: Xid (PCI:0000:dc:00): 45,
    # ... caused by previous Xid 149" (NVIDIA/open-gpu-kernel-modules #1150).
    r'NVRM: Xid \(PCI:[0-9a-fA-F:.]+\): \d+',
    # Xid 79 in words: "NVRM: GPU at PCI:0000:3b:00: GPU has fallen off
    # the bus." (NVIDIA's Xid catalog).
    r'[Ff]allen off the bus',
    # CUDA's cudaErrorECCUncorrectable as PyTorch says it: "RuntimeError:
    # CUDA error: uncorrectable ECC error encountered" (jade-hpc-gpu #194,
    # kohya-ss/sd-scripts #1434), "cuda runtime error (39) : uncorrectable
    # ECC error encountered" (PyTorch 1.0, NVIDIA/semantic-segmentation
    # #33); TensorFlow's "CUDA_ERROR_ECC_UNCORRECTABLE".
    r'uncorrectable ECC error|ECC_UNCORRECTABLE',
    # nvidia-smi once the GPU is lost: "Unable to determine the device
    # handle for GPU0000:03:00.0: Unknown Error" (rwth-i6/returnn #1486).
    r'Unable to determine the device handle for GPU',
    # ROCm's runtime on a hung or faulted GPU: "HW Exception by GPU node-2
    # (Agent handle: 0x...) reason :GPU Hang".
    r'HW Exception by GPU node-\d+',
    # CUDA's cudaErrorNvlinkUncorrectable: "CUDA error: uncorrectable
    # NVLink error detected during the execution"; nvidia-smi's "GPU is
    # lost. Reboot the system to recover this GPU".
    r'uncorrectable NVLink error|GPU is lost',
    # A device that computed a wrong answer without an error, as this
    # suite's check of answers names it: "silent data corruption: rank 1
    # on n2 (...): matmul fp32 #2 (...) differs from the majority's ..."
    # (hpctestlib_ml.answers.WRONG).
    rf'\b{answers.WRONG}: ',
)]

#: out_of_memory: device or host memory ran out.
OUT_OF_MEMORY = [re.compile(p) for p in (
    # PyTorch's caching allocator: "torch.cuda.OutOfMemoryError: CUDA out
    # of memory. Tried to allocate 22.00 MiB." (pytorch/pytorch #16417),
    # ROCm's "torch.OutOfMemoryError: HIP out of memory." (ROCm/TheRock
    # #1054), 1.x's "RuntimeError: CUDA out of memory.".
    r'(?:CUDA|HIP) out of memory|OutOfMemoryError',
    # A kernel or library allocation: "CUDA error: out of memory";
    # NCCL's "include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'"
    # (NVIDIA/nccl #1235); cuBLAS's "CUBLAS_STATUS_ALLOC_FAILED".
    r"CUDA error: out of memory|Cuda failure 'out of memory'|"
    r'CUBLAS_STATUS_ALLOC_FAILED',
    # TensorFlow: "failed to allocate 890.06M ... HIP_ERROR_OutOfMemory"
    # (keras-team/keras #13889), "CUDA_ERROR_OUT_OF_MEMORY",
    # "ResourceExhaustedError: OOM when allocating tensor".
    r'CUDA_ERROR_OUT_OF_MEMORY|HIP_ERROR_OutOfMemory|OOM when allocating',
    # Slurm's cgroup: "slurmstepd: error: Detected 1 oom_kill event in
    # StepId=440575.0." (chrisknewman/tusas #149), "Detected 1 oom-kill
    # event(s) in step 3495064.0 cgroup" and srun's "task 4: Out Of
    # Memory" (hafs-community/HAFS #101).
    r'Detected \d+ oom[-_]kill event|: tasks? [\d,\-]+: Out Of Memory',
    # Slurm's memory enforcement: "slurmstepd: error: Job 7518 exceeded
    # memory limit (626359956 > 512000000), being killed", "Exceeded job
    # memory limit" (coqui-ai/STT #2238; failures._SLURM_MEMORY_LIMIT).
    r'exceeded memory limit \(\d+ > \d+\), being killed|'
    r'Exceeded (?:job|step) memory limit(?! at some point)',
    # The kernel's OOM killer in dmesg: "Out of memory: Killed process 123
    # (python)".
    r'Out of memory: Kill(?:ed)? process',
    # The host in Python: "MemoryError", errno 12 "Cannot allocate memory".
    r'(?<![A-Za-z])MemoryError|Cannot allocate memory',
    # PyTorch's DataLoader on a full /dev/shm: "ERROR: Unexpected bus error
    # encountered in worker. This might be caused by insufficient shared
    # memory (shm)."; "It is possible that dataloader's workers are out of
    # shared memory."
    r'insufficient shared memory|out of shared memory',
    # A rank killed by SIGKILL with no other cause in its log, as the
    # failures parser words it ("rank 1 on n2 died: Killed (srun)", "rank
    # 5 was killed by signal 9 (SIGKILL)"): the kernel's or the cgroup's
    # OOM killer is what sends it in practice (lmzpai/roboMamba #10).
    r'died: Killed \(srun\)|killed by signal 9\b',
    # The same SIGKILL as others report it: a shell's "./train.sh: line 5:
    # 12345 Killed  python train.py" or a bare "Killed"; PyTorch's
    # "DataLoader worker (pid 1234) is killed by signal: Killed."; Open
    # MPI's "mpirun noticed that process rank 3 with PID 0 on node n3
    # exited on signal 9 (Killed)."; Kubernetes' "OOMKilled"; exit status
    # 137 (128 + SIGKILL).
    r'^Killed$|\d Killed +\S|killed by signal: Killed|'
    r'exited on signal 9 \(Killed\)|\bOOMKilled\b|[Ee]xit code:? 137\b',
    # PBS: "=>> PBS: job killed: mem 16777216kb exceeded limit 8388608kb".
    r'PBS: job killed: v?mem',
)]

#: filesystem: the file system refused a write or a read, or data is not
#: where the job looks for it.
FILESYSTEM = [re.compile(p) for p in (
    # errno 28, ENOSPC: "OSError: [Errno 28] No space left on device"
    # (databrickslabs/dolly #139, a checkpoint's torch.save).
    r'No space left on device',
    # errno 122, EDQUOT: "OSError: [Errno 122] Disk quota exceeded"
    # (NOAA-EPIC/EAGLE #121, Triton's cache in a training step).
    r'Disk quota exceeded',
    # errno 116, ESTALE: "OSError: [Errno 116] Stale file handle"
    # (nanoporetech/taiyaki #66), "RuntimeError: read(): fd 33 failed with
    # Stale file handle" (pytorch/pytorch #45826).
    r'Stale file handle',
    # errno 5 and 30: "RuntimeError: write(): fd 29 failed with
    # Input/output error" (pytorch/pytorch #10577), "Read-only file system".
    r'Input/output error|Read-only file system',
    # A network file system gone: Lustre's eviction "OSError: [Errno 108]
    # Cannot send after transport endpoint shutdown", a FUSE or NFS mount's
    # "[Errno 107] Transport endpoint is not connected".
    r'Cannot send after transport endpoint shutdown|Transport endpoint is '
    r'not connected',
    # torch.save on a file system that took no more: "RuntimeError:
    # [enforce fail at inline_container.cc:595] . unexpected pos 2213604544
    # vs 2213604432", "PytorchStreamWriter failed writing file data/7:
    # file write failed".
    r'inline_container\.cc:\d+\] \. unexpected pos|PytorchStreamWriter '
    r'failed writing file',
    # Data the job may not read: "PermissionError: [Errno 13] Permission
    # denied: '/data/imagenet/train'".
    r'Permission denied',
    # Missing data: "FileNotFoundError: [Errno 2] No such file or
    # directory: 'your_data_path/train_all'" (layumi/Person_reID_baseline
    # _pytorch #214). Not a missing library ("cannot open shared object
    # file: No such file or directory" names no path after it).
    r"FileNotFoundError|No such file or directory: ['\"/]",
)]

#: scheduler: the batch system ended the job from outside.
SCHEDULER = [re.compile(p) for p in (
    # slurmstepd: "*** JOB 494583 ON ... CANCELLED AT 2024-04-20T09:09:37
    # DUE TO TIME LIMIT ***" (ZettaAI/zetta_utils #671), "... DUE TO
    # PREEMPTION ***" (SystemsGenetics/GEMmaker PR #242), "DUE TO JOB
    # REQUEUE" (facebookincubator/submitit #1708), "DUE TO NODE FAILURE".
    r'\*\*\* JOB \S+ ON \S+ CANCELLED AT',
    # Slurm's job states in sacct or squeue output.
    r'\b(?:NODE_FAIL|BOOT_FAIL|PREEMPTED|DEADLINE)\b',
    # A rank ended by SIGTERM, Slurm's first word at a time limit or
    # scancel, as the failures parser words it ("killed by signal 15
    # (SIGTERM)"), or the program's own note ("[rank: 0] Received SIGTERM:
    # 15", Lightning).
    r'killed by signal 15\b|Received SIGTERM',
    # torchrun's agent when Slurm signals it: "torch.distributed.elastic.
    # multiprocessing.api.SignalException: Process 4242 got signal: 15".
    r'SignalException: Process \d+ got signal: (?:15|1)\b',
    # srun on a node lost under it: "srun: error: Node failure on nid001234";
    # slurmstepd that could not end the tasks: "*** JOB 1 STEPD TERMINATED
    # ON n1 AT ... DUE TO JOB NOT ENDING WITH SIGNALS ***".
    r'Node failure on \S+|STEPD TERMINATED ON',
    # Other schedulers' time limits: PBS "=>> PBS: job killed: walltime
    # 3660 exceeded limit 3600", LSF "TERM_RUNLIMIT: job killed after
    # reaching LSF run time limit".
    r'PBS: job killed: walltime|TERM_RUNLIMIT',
    # A run stopped by SIGINT (Ctrl-C, or a launcher passing it on):
    # Python's "KeyboardInterrupt".
    r'\bKeyboardInterrupt\b',
)]

#: numerics: the loss or the gradients went non-finite.
NUMERICS = [re.compile(p) for p in (
    # Megatron-LM's check: "AssertionError: Rank 3: found NaN in local
    # grad norm in backwards pass. Device: 3, node: ..."
    # (alibaba/Pai-Megatron-Patch #60; NVIDIA/Megatron-LM #780).
    r'found (?:NaN|Inf) in local grad norm',
    # Megatron's iteration line: "| lm loss: nan |", "| grad norm: nan |"
    # (deepspeedai/Megatron-DeepSpeed #203), "number of nan iterations:
    # 2".
    r'(?:lm loss|grad norm): [-+]?(?:nan|inf)\b',
    r'number of nan iterations: +[1-9]',
    # The loss scaler at its floor: DeepSpeed's "Exception: Current loss
    # scale already at minimum - cannot decrease scale anymore. Exiting
    # run." (yangjianxin1/Firefly #68).
    r'loss scale already at minimum',
    # HF Trainer: "{'loss': nan, 'learning_rate': ...}" and its metrics
    # table's "eval_loss = nan" (jzhang38/TinyLlama #153).
    r"'(?:eval_)?loss': (?:nan|inf)\b|"
    r'\b(?:train|eval)_loss\s*=\s*(?:nan|inf)\b',
    # This suite's programs and checks: "training loss is not finite"
    # (metrics.common_problems); "loss curve departs from reference"
    # (history_refs.lookup).
    r'training loss is not finite|loss curve departs',
    # This suite's check of answers: every rank agreeing on an answer
    # other than the known-good one of its software stack ("... computed
    # v1:..., not the known-good digest of this stack v1:...":
    # hpctestlib_ml.answers.KNOWN_DIFFERS).
    answers.KNOWN_DIFFERS,
    # PyTorch's anomaly mode: "RuntimeError: Function 'LogSoftmaxBackward0'
    # returned nan values in its 0th output."; "Loss is nan, stopping
    # training" (MAE-style loops, OpenGVLab/LLaMA-Adapter #144).
    r'returned nan values|Loss is (?:nan|inf)\b',
    # fairseq's scaler: "FloatingPointError: Minimum loss scale reached
    # (0.0001). Your loss is probably exploding."; TensorBoard's writer
    # given a NaN loss: "Warning: NaN or Inf found in input tensor.".
    r'Minimum loss scale reached|NaN or Inf found in input tensor',
    # The suite's own programs' logs: MLPerf's logger writes a float with
    # json.dumps (":::MLLOG {... "value": {"loss": NaN} ...}"), OpenCLIP
    # "Loss: nan (nan)", the torchvision program "[hpcml] iteration 3 loss
    # nan".
    r'"(?:train_)?loss": (?:NaN|-?Infinity)\b|'
    r'(?<![A-Za-z_])Loss: (?:nan|-?inf)\b|\[hpcml\] iteration \d+ loss '
    r'(?:nan|-?inf)\b',
    # Any loss logged as NaN or infinite, as a training loop words it:
    # TensorFlow's "INFO:tensorflow:global step 2458: loss = nan (2.34
    # sec/step)" (ardiya/HashtagPrediction #6), "step 1655 - loss
    # nan - moving ave loss nan" (MahmudulAlam/Automatic-Identification-
    # and-Counting-of-Blood-Cells #15), Lightning's progress bar "320/320
    # [00:21<00:00, 14.77it/s, loss=nan, v_num=0]" (wogur110/
    # PNI_anomaly_detection #7).
    r'(?<![A-Za-z])[Ll]oss[\'"]?\s*(?:[:=]\s*)?[\'"]?[-+]?'
    r'(?:nan|NaN|NAN|inf|Inf|INF|Infinity)\b',
)]

#: bad_input: the program refused its arguments.
BAD_INPUT = [re.compile(p) for p in (
    # argparse: "finetune_huggingface_chatglm.py: error: unrecognized
    # arguments: --DDP-impl local" (alibaba/Pai-Megatron-Patch #21),
    # "trainer.py: error: argument --mixed_precision: invalid choice:
    # 'fp32' (choose from 'no', 'fp16', 'bf16')" (StableTuner #12), "error:
    # the following arguments are required: --dataset_name", "error:
    # argument --lr: invalid float value".
    # argparse's other refusals (Lib/argparse.py): "error: ambiguous
    # option: --lr could match --lr-decay, --lr-warmup", "error: one of
    # the arguments --fp16 --bf16 is required", "error: argument --bf16:
    # not allowed with argument --fp16".
    r'error: (?:unrecognized arguments|the following arguments are '
    r'required|argument [^:]+: (?:invalid|expected|not allowed with)|'
    r'ambiguous option|one of the arguments .+ is required)',
    # Megatron-LM's checks of its arguments (megatron/training/arguments.py
    # validate_args): "AssertionError: num_layers (30) must be divisible by
    # pipeline_model_parallel_size", "world size (8) is not divisible by
    # tensor parallel size (3) times pipeline parallel size (1)".
    r'(?:must be|is not) divisible by',
    # HF's argument parser: "ValueError: Some specified arguments are not
    # used by the HfArgumentParser: [...]".
    r'arguments are not used by the HfArgumentParser',
    # This suite's setup: "bad_input: batch_size must be an integer >= 1".
    r'\bbad_input: ',
    # absl's flags (TensorFlow's and JAX's programs): "FATAL Flags parsing
    # error: Unknown command line flag 'job_dir'. Did you mean: log_dir ?"
    # (google/automl #934), "absl.flags._exceptions.UnrecognizedFlagError:
    # Unknown command line flag 'train'" (hsqmlzno1/HATN #4); gflags'
    # "ERROR: unknown command line flag 'batch_size'" (PaddlePaddle/
    # PaddleSpeech #376).
    r'Flags parsing error|UnrecognizedFlagError|IllegalFlagValueError|'
    r'[Uu]nknown command line flag',
    # Slurm refusing the job (:data:`SUBMISSION_REFUSED`).
    r'^(?:sbatch|salloc|srun)(?:\.bin)?: error: (?:Batch job submission '
    r'failed: |Unable to allocate resources: )?(?:[Ii]nvalid|Requested '
    r'(?:time limit is invalid|node configuration is not available)|'
    r'Memory specification can not be satisfied|Time limit specification '
    r'required|Node count specification invalid|Job violates accounting)',
)]

#: software: the program, its libraries or their versions.
SOFTWARE = [re.compile(p) for p in (
    # Python imports: "ModuleNotFoundError: No module named 'training'"
    # (mlfoundations/datacomp #79, OpenCLIP's training package),
    # "ImportError: cannot import name ...".
    r'ModuleNotFoundError|ImportError|No module named',
    # Shared libraries: "undefined symbol: ...", "libcudart.so.11.0:
    # cannot open shared object file", "version `GLIBCXX_3.4.29' not
    # found".
    r"undefined symbol|cannot open shared object file|version `\S+' not "
    r'found',
    # Versions that do not fit: "RuntimeError: The NVIDIA driver on your
    # system is too old (found version 11040)." (serend1p1ty/SeqNet #36),
    # "CUDA driver version is insufficient for CUDA runtime version", "no
    # kernel image is available for execution on the device".
    r'driver on your system is too old|driver version is insufficient|'
    r'no kernel image is available|[Vv]ersion mismatch|mismatches the '
    r'version|compiled with different CUDA',
    # A crash in code: "Segmentation fault", an illegal memory access, a
    # device-side assert.
    r'Segmentation fault|SIGSEGV|illegal memory access|device-side assert',
    # ROCm's word for an illegal access: "Memory access fault by GPU
    # node-2 (Agent handle: 0x...) on address 0x.... Reason: Page not
    # present or supervisor privilege."
    r'Memory access fault by GPU',
)]

#: communication: the collectives or their transport.
COMMUNICATION = [re.compile(p) for p in (
    # PyTorch's NCCL process group: "torch.distributed.DistBackendError:
    # NCCL error in: .../ProcessGroupNCCL.cpp:1333, unhandled system error"
    # (modelscope/ms-swift #1233); NCCL's own "NCCL WARN" lines
    # ("include/topo.h:27 NCCL WARN Could not find real path of ...",
    # pytorch/pytorch #40273); RCCL prints the same words.
    r'NCCL error|NCCL WARN|RCCL|nccl\w*Error',
    # NCCL's WARN line as this module words it: "NCCL on ng30903 (GPU 3):
    # ..." (:func:`_nccl_words`).
    r'\bNCCL on [\w.-]+ \(GPU \d+\)',
    # The Collectives component's check of each size: "all_reduce: 5
    # wrong elements" (a collective that delivered wrong data; nccl-tests'
    # "#wrong" column).
    r'^(?:all_reduce|all_gather|reduce_scatter): \d+ wrong elements',
    # PyTorch's watchdog: "[Rank 2] Watchdog caught collective operation
    # timeout: WorkNCCL(SeqNum=7487, OpType=ALLREDUCE, ...) ran for 1800096
    # milliseconds before timing out." (ShinoharaHare/LLM-Training #7).
    r'Watchdog caught collective operation timeout|watchdog thread '
    r'terminated',
    # Gloo: "Gloo connectFullMesh failed with [.../pair.h:301] Connect
    # timeout" (sehoffmann/dmlcloud #47), "[.../gloo/transport/tcp/pair.cc:
    # 799] connect [172.31.71.170]:13195: Connection refused"
    # (pytorch/pytorch #108732).
    r'Gloo|gloo/transport',
    # MPI and Horovod: "MPI_ABORT was invoked on rank 3 in communicator
    # MPI_COMM_WORLD", "Horovod has been shut down".
    r'MPI_ABORT|MPI_ERR_|Horovod has been shut down|lost communication '
    r'with a remote daemon',
    # c10d's store and rendezvous: "torch.distributed.DistNetworkError",
    # "DistStoreError: Timed out after 901 seconds", "RendezvousTimeout
    # Error", "Connection refused", "Connection reset by peer".
    r'Dist(?:Backend|Network|Store)Error|Rendezvous\w*Error|'
    r'Connection (?:refused|reset by peer|closed by peer)|Socket Timeout|'
    r'Timed out initializing process group',
)]

#: The tables in the order a line is classified: the first that matches
#: wins. A cause by nature comes before its usual consequences: a GPU's
#: fault or an out-of-memory error makes NCCL fail, never the reverse;
#: a missing library or a bad argument before the collective its rank
#: never joined.
ORDER = (
    ('hardware', HARDWARE),
    ('out_of_memory', OUT_OF_MEMORY),
    ('filesystem', FILESYSTEM),
    ('scheduler', SCHEDULER),
    ('numerics', NUMERICS),
    ('bad_input', BAD_INPUT),
    ('software', SOFTWARE),
    ('communication', COMMUNICATION),
)

#: The category of each way the scheduler ends a job
#: (:func:`hpctestlib_ml.parsers.failures.job_end`).
END_CATEGORIES = {
    'timeout': 'scheduler', 'cancelled': 'scheduler',
    'node_fail': 'scheduler', 'preempted': 'scheduler',
    'requeued': 'scheduler', 'oom': 'out_of_memory',
}

#: The category of an exception that matches no table: a bug or an
#: unhandled case in the program.
DEFAULT_CATEGORY = 'software'

#: Categories of a root-cause line that another error line of the log may
#: explain: a collective's failure is what a peer's fault looks like to
#: the ranks that wait for it.
CONSEQUENCES = ('communication',)
