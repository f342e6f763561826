"""Which kind of failure a training run had, and why, in one line.

A failed case's message starts with its category, so that whoever reads it
knows at once who acts on it (docs/guide/regression.md, "Triage: failures
and who acts on them"):

``out_of_memory``  device or host memory ran out (the user's sizes)
``communication``  NCCL, RCCL, Gloo, MPI, collective timeouts, watchdogs
``hardware``       Xid, ECC, a GPU fallen off the bus (the site)
``filesystem``     no space, I/O errors, stale handles, quota, missing data
``scheduler``      time limit, cancelled, node failure, preemption
``numerics``       a non-finite loss or gradient, loss scale underflow
``software``       import errors, version mismatches, exceptions in code
``bad_input``      invalid arguments
``hang``           no rank advanced: the suite's hang watch ended the job
                   (the user for a dead data loader, the operators for a
                   stuck collective or node)

The root cause wins over its consequences (one rank's out-of-memory error
makes its peers fail in the collective; the answer is that error on that
rank):

1. evidence that is a cause by nature, wherever it stands in the log: the
   GPU's own errors (:data:`HARDWARE`), the suite's hang watch, which
   ended the job and said which rank stopped where (:func:`hang`; the
   deaths of the ranks it ended are its consequences), Slurm's refusal
   of the job
   (:func:`submission_refused`) and the scheduler's end of the job
   (:func:`hpctestlib_ml.parsers.failures.job_end`: its time limit, an
   oom-kill event or its memory limit, preemption, a failed node,
   scancel);
2. the root-cause line :mod:`hpctestlib_ml.parsers.failures` finds (the
   rank that failed first, with its own exception or signal), classified
   by the pattern tables below in :data:`ORDER`; where it is only a
   collective's failure or a plain exception, another error line of the
   log that says more (an out-of-memory error, a full disk, a NaN) is the
   cause it reported;
3. a log that ended well but whose loss went non-finite: ``numerics``, at
   its step.

The reason then says what the log adds beside its line
(:func:`with_detail`): the collective a watchdog timed out, the GPU
architecture a PyTorch build lacks. A log that shows no failure says
whether it holds a training log at all (:func:`no_failure`).

A log that ended well and holds the answers of the check of silent data
corruption (``[hpcml] answer`` records) is judged by
:mod:`hpctestlib_ml.answers` from the log alone, without the known-good
digests of the site's history: a rank whose answer differs from the
majority's is ``hardware`` (:func:`wrong_answer`).

Pure: the standard library, the failures parser, :mod:`run_end` (what a
run that did not end shows) and :mod:`answers` only.
"""
import dataclasses
import re

from hpctestlib_ml import answers, run_end
from hpctestlib_ml.parsers import failures, labels

#: The categories, in the order of the docs' table of them.
CATEGORIES = ('out_of_memory', 'communication', 'hardware', 'filesystem',
              'scheduler', 'numerics', 'software', 'bad_input', 'hang')

#: The categories only the suite's own lines give (no public log has
#: them): ``hang``, the hang watch's (``src/hang_watch.py``).
OWN_CATEGORIES = ('hang',)

#: The longest reason, in characters (failures' limit).
REASON_LIMIT = 300


@dataclasses.dataclass(frozen=True)
class Triage:
    '''A run's failure: its *category* (one of :data:`CATEGORIES`, None for
    a log that shows none), the one-line *reason*, and the *rank* and
    *node* where the log names them.'''
    category: str
    reason: str
    rank: str = None
    node: str = None


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

#: Lines that report an error, where a cause may be stated: words of
#: error, NCCL's WARN, a C++ exception's what(), the OOM killer. Not
#: NCCL's INFO lines (they print "No such file or directory" for plugins
#: they do not need) nor Python's warnings.
_ERROR_LINE = re.compile(
    r'[Ee]rror|ERROR|\bWARN\b|[Ee]xception|what\(\)|[Ff]ail|Killed|'
    r'Out Of Memory|out of memory|\bnan\b|\binf\b|Unable to|CANCELLED|'
    r'Watchdog|[Tt]imed? ?out')
_INFO_LINE = re.compile(r'NCCL INFO|Warning:')

#: Where a line names its rank: torchrun's "[rank3]:", PyTorch's "[Rank
#: 1]", Megatron's "Rank 3:", the failures parser's "rank 1 on n2".
_RANK = re.compile(r'\[[Rr]ank ?(\d+)\]|\b[Rr]ank (\d+)\b')
#: Where a line names its node: Megatron's "node: set-zw04-...", the
#: failures parser's "rank 1 on n2", NCCL's host (:func:`_nccl_words`),
#: Open MPI's "on node n3", a cluster's health alert "Xid errors on
#: instance: ip-26-0-146-100" (huggingface/m4-logs).
_NODE = re.compile(r'\bnode: ?([\w.-]+)|\brank \S+ on ([\w.-]+)|'
                   r'\bNCCL on ([\w.-]+)|\bon node ([\w.-]+)|'
                   r'\bon instance: ([\w.-]+)')
#: NCCL's line prefix "ng30903:3063028:3066152 [3] include/alloc.h:178
#: NCCL WARN ...": host, GPU (the process's CUDA device), message.
_NCCL_LINE = re.compile(r'^([\w.-]+):\d+:\d+ \[(\d+)\] (?:\S+ )?NCCL WARN '
                        r'(.+)$')

#: The loss scaler's floor: the minimum loss scale of Megatron-LM
#: (``--min-loss-scale``) and DeepSpeed (``min_loss_scale``) by default. A
#: scaler that reduces the scale to it or below keeps overflowing.
MIN_LOSS_SCALE = 1.0
_SCALE_AT_MINIMUM = re.compile(r'loss scale already at minimum')
_LOSS_SCALE_DOWN = re.compile(
    r'(?:reducing loss scale to|Attempted loss scale: \S+, reducing to) '
    r'([0-9.eE+-]+)')


def classify(line):
    '''The category of the first table in :data:`ORDER` that matches
    *line*, or None.'''
    for category, table in ORDER:
        if any(pattern.search(line) for pattern in table):
            return category
    return None


def triage(text, state=None, exitcode=None):
    '''The :class:`Triage` of a run's log *text*, with the job *state*
    ReFrame polled and the job's *exitcode* where they are known, its
    reason with what the log says beside it (:func:`with_detail`). A log
    whose lines carry pdsh's ``host: `` (DeepSpeed's multi-node launcher)
    is read without it, its node the host whose line says why.'''
    hosts = labels.pdsh_hosts(text)
    bare = labels.strip_hosts(text, hosts)
    found = with_detail(_triage(bare, state, exitcode), bare)
    if hosts and found.node is None and found.category is not None:
        node = labels.host_of(found.reason, text, hosts)
        if node:
            found = dataclasses.replace(found, node=node)
    return found


def _triage(text, state, exitcode):
    '''The :class:`Triage` of *text* (:func:`triage`).'''
    found = by_nature(text, state)
    if found:
        return found
    failed = failures.failure_reason(text, state, exitcode)
    line = root_line(text, state)
    if line is None or failed is None and non_finite(text):
        # No line says why (the run ended well, or only its exit code or
        # last line says it did not), or it ended well with a non-finite
        # loss: that loss is its failure.
        return (non_finite(text) or
                (Triage(DEFAULT_CATEGORY, failed) if failed else
                 wrong_answer(text) or no_failure(text)))
    category = classify(line)
    better = stronger_evidence(text, category)
    if better:
        return better
    numerics = (non_finite(text, REASON_LIMIT - len(line) - 7)
                if category is None else None)
    if numerics:
        category, line = 'numerics', f'{line} after {numerics.reason}'
    category = category or DEFAULT_CATEGORY
    if category == 'out_of_memory' and _SIGKILL.search(line):
        line += _SIGKILL_NOTE
    rank, node = _where(line, failures.root_cause(text), text)
    lagging = _DESYNC.search(text) if category == 'communication' else None
    if lagging:
        rank = lagging.group(1)
        line = (f'rank {rank} {lagging.group(2).strip()} (PyTorch\'s desync '
                f'report); {line}')
    return Triage(category, _trim(line), rank, node)


def with_detail(found, text):
    '''*found* (a :class:`Triage` of *text*) with what the log says
    beside its line: a collective timeout's collective and sequence number
    (:func:`collective_timeout`), the GPU architecture a PyTorch build has
    no kernels for (:func:`architecture_missing`).'''
    if found.category == 'communication':
        return collective_timeout(found, text)
    if found.category == 'software':
        return architecture_missing(found, text)
    return found


#: PyTorch's watchdog at a collective's timeout, the collective's name and
#: sequence number in its WorkNCCL: "[Rank 5] Watchdog caught collective
#: operation timeout: WorkNCCL(SeqNum=199, OpType=_REDUCE_SCATTER_BASE,
#: NumelIn=7098994688, NumelOut=443687168, Timeout(ms)=600000) ran for
#: 882737 milliseconds before timing out." (NVIDIA/Megatron-LM #935, in a
#: C++ exception's what() after "terminate called after throwing an
#: instance of 'c10::DistBackendError'"; huggingface/open-r1 #620, the
#: same cut across lines by the terminal).
_COLLECTIVE_TIMEOUT = re.compile(
    r'\[Rank (\d+)\] Watchdog caught collective operation timeout: '
    r'(?:WorkNCCL|WorkRCCL)\((?:[^()]|\([^()]*\))*\) ran for \d+ '
    r'milliseconds before timing out\.')


def collective_timeout(found, text):
    '''*found* with the collective that timed out where the log has
    PyTorch's watchdog line and *found*'s reason lacks its ``OpType``:
    its rank's (*found*'s rank), else the first; the rank it names where
    *found* names none.'''
    if 'Watchdog' not in text or 'OpType=' in found.reason:
        return found
    timeouts = list(_COLLECTIVE_TIMEOUT.finditer(text))
    if not timeouts:
        # A terminal or an issue's page that cut the line: read it whole.
        timeouts = list(_COLLECTIVE_TIMEOUT.finditer(text.replace('\n', '')))
    if not timeouts:
        return found
    own = [m for m in timeouts if m.group(1) == found.rank]
    match = (own or timeouts)[0]
    line = found.reason
    words = match.group(0)
    reason = (words if _CXX_TERMINATE.match(line) or
              len(line) + len(words) + 2 > REASON_LIMIT else
              f'{line}: {words}')
    return dataclasses.replace(found, reason=_trim(reason),
                               rank=found.rank or match.group(1))


#: A C++ exception's first line, which names only its type.
_CXX_TERMINATE = re.compile(r'terminate called after throwing')

#: PyTorch's warning where a build has no kernels for the GPU's
#: architecture: "NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not
#: compatible with the current PyTorch installation." then "The current
#: PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70."
#: (Turoad/CLRNet #83; Janrupf/stable-diffusion-webui-nix #9, sm_120).
_ARCH_WARNING = re.compile(
    r'(\S[^\n]*?) with CUDA capability (sm_\d+) is not compatible with the '
    r'current PyTorch installation')
_ARCH_SUPPORTED = re.compile(
    r'The current PyTorch install supports CUDA capabilities ((?:sm_\d+ ?)+)')
#: The error that follows it: "RuntimeError: CUDA error: no kernel image
#: is available for execution on the device".
_NO_KERNEL = re.compile(r'no kernel image is available')


def architecture_missing(found, text):
    '''*found* with the GPU architecture the PyTorch build lacks, where
    its reason is CUDA's "no kernel image is available" and the log has
    PyTorch's warning naming the architecture; else *found*.'''
    warning = _ARCH_WARNING.search(text)
    if not (warning and _NO_KERNEL.search(found.reason)):
        return found
    device = warning.group(1).split(': ')[-1].strip()
    supported = _ARCH_SUPPORTED.search(text)
    has = (f'; this PyTorch build has kernels for {supported.group(1).strip()}'
           if supported else '')
    return dataclasses.replace(found, reason=_trim(
        f'{found.reason} ({device} is {warning.group(2)}{has})'))


def wrong_answer(text):
    '''The :class:`Triage` of a log whose ranks' answers show a wrong one
    or cannot be compared (:func:`hpctestlib_ml.answers.log_verdict`),
    naming the rank and node where one rank alone is suspect; None
    otherwise.'''
    found = answers.log_verdict(text)
    if found is None or not found.problems:
        return None
    rank, node = (found.suspects[0] if len(found.suspects) == 1
                  else (None, None))
    return Triage(problems_category(found.problems),
                  _trim('; '.join(found.problems)),
                  None if rank is None else str(rank), node)


def no_failure(text):
    '''The :class:`Triage` of a log that shows no failure, category None:
    a file that holds no training log (:func:`unrecognised`), a run that
    did not end (:func:`hpctestlib_ml.run_end.unended`: aborted by its
    program, cut, its budget spent with no end record, stopped before its
    first measured step), else a run that ended well.'''
    end = run_end.unended(text)
    if end:
        return Triage(None, _trim(end.reason))
    why = unrecognised(text)
    if why:
        return Triage(None, f'{NO_LOG}: {why}')
    return Triage(None, NO_FAILURE)


#: The reason of a log that ended well.
NO_FAILURE = 'no failure found in the log'
#: The start of the reason of a file that holds no training log.
NO_LOG = 'no training log recognised'

#: Lines of a training run, its launcher or its framework, beyond the
#: error lines the tables know: MLPerf's events, the suite's records,
#: Megatron's iteration line, HF Trainer's logged dict, OpenCLIP's "Train
#: Epoch: 0 [...]", tf_cnn_benchmarks' and Horovod's images/sec, a loss
#: or a step with its number; srun's, slurmstepd's, torchrun's,
#: torch.distributed's and NCCL's lines; a Python traceback.
_TRAINING_LOG = re.compile(
    r':::MLLOG|\[hpcml\] |\biteration +\d+ */ *\d+ *\||'
    r"\{'(?:loss|train_runtime|eval_loss)': |Train Epoch: \d|"
    r'[Ii]mg/sec|images/sec|'
    r'(?<![A-Za-z])[Ll]oss\w*\s*[:=]?\s*[-+]?(?:\d|nan\b|NaN\b|inf\b)|'
    r'\b(?:[Ss]tep|[Ii]ter(?:ation)?|[Ee]poch)\W{0,3}\d|'
    r'^srun: |slurmstepd|torchrun|torch\.distributed|NCCL INFO|'
    r'Traceback \(most recent call last\)', re.MULTILINE)

#: The share of undecodable characters (read as U+FFFD) and NULs above
#: which a file is binary data, not a log.
_BINARY_SHARE = 0.01


def unrecognised(text):
    '''Why *text* holds no training log (empty, binary data, or not one
    line :data:`_TRAINING_LOG` or a table knows); None where it holds
    one.'''
    if _TRAINING_LOG.search(text):
        return None
    if not text.strip():
        return ('the file is empty: give the job\'s output (its stdout and '
                'stderr)')
    odd = text.count('\ufffd') + text.count('\x00')
    if odd > _BINARY_SHARE * len(text):
        return ('the file is binary data, not text: give the job\'s output '
                '(its stdout and stderr)')
    if any(classify(line) for line in _error_lines(text)):
        return None
    return ('no line of a training run, its launcher or an error that '
            'triage knows: give the job\'s output (its stdout and stderr)')


#: PyTorch's desync report at a watchdog timeout (TORCH_NCCL_DESYNC_DEBUG=1)
#: names the rank the others waited for: " - To our best knowledge, the
#: lagging/dead/mismatched ranks that caused the desync are:" then "[1]
#: finished collective #2, but didn't join collective #3 (count from 1)"
#: (stas00/ml-engineering, debug/pytorch.md).
_DESYNC = re.compile(r'ranks that caused the desync are:\s*\n\s*\[(\d+)\]'
                     r'([^\n]*)')


def root_line(text, state):
    '''The line that says why the run failed: the failures parser's where
    it found a failed rank or an exception or a program's own error, else
    the first error line a table classifies (:func:`error_line`); None
    where the log says no such thing.'''
    if (failures.root_cause(text) or failures.exception_line(text) or
            failures.program_error(text)):
        return failures.failure_line(text, state)
    return error_line(text)


def by_nature(text, state=None):
    '''A :class:`Triage` from evidence that is a cause wherever it stands:
    a GPU's own error (:data:`HARDWARE`: the first Xid a GPU raised, or
    an ECC or lost-GPU line), else the hang watch's line (:func:`hang`),
    else Slurm's refusal of the job (it never ran: what the tool that
    submitted it printed after is its consequence), else the scheduler's
    end of the job; None.'''
    lines = [ln.strip() for ln in text.splitlines()
             if any(p.search(ln) for p in HARDWARE)]
    if lines:
        line = _first_cause_xid(lines)
        where = [_where(ln, failures.root_cause(text), text) for ln in lines]
        rank = next((r for r, _ in where if r), None)
        node = next((n for _, n in where if n), None)
        return Triage('hardware', _trim(line), rank, node)
    hung = hang(text)
    if hung:
        return hung
    refused = submission_refused(text)
    if refused:
        return refused
    end = failures.job_end(text, state)
    if end:
        return Triage(END_CATEGORIES[end.kind], end.message, end.rank,
                      end.node)
    return None


#: The hang watch's lines on the job's standard error (``src/hang_watch.
#: py``): ``hpcml hang: <the rank that stopped where, where the others
#: wait, who acts>`` once it has every rank's report, and before it,
#: ``hpcml hang watch: no rank on n1 advanced for 131 s (bound 120 s):
#: recording stacks in ...`` (all a log has where the job was killed in
#: between).
_HANG = re.compile(r'^hpcml hang(?: watch)?: (.*)$', re.M)
#: The first rank the line names as stopped, and its node.
_HANG_RANK = re.compile(r'\brank (\d+) on ([\w.-]+) stopped\b')


def hang(text):
    '''A ``hang`` :class:`Triage` from the hang watch's last summary line
    in *text* (else its first notice), with the first rank it names as
    stopped and that rank's node; None where the watch said nothing.'''
    lines = _HANG.findall(text)
    if not lines:
        return None
    summaries = [m.group(1) for m in _HANG.finditer(text)
                 if not m.group(0).startswith('hpcml hang watch: ')]
    reason = summaries[-1] if summaries else lines[0]
    named = _HANG_RANK.search(reason) if summaries else None
    return Triage('hang', _trim(reason), *(named.groups() if named else
                                           (None, None)))


#: Slurm's refusals of a job at submission and the option each is about:
#: (words of the refusal, option). "sbatch: error: invalid partition
#: specified: gpu-v100-32GB" then "Batch job submission failed: Invalid
#: partition name specified" (AaltoSciComp/scicomp-docs PR #792), "Invalid
#: --time specification" (nservant/HiC-Pro #645), "Requested time limit is
#: invalid (missing or exceeds some limit)" (NVIDIA-NeMo/RL PR #3051),
#: "Memory specification can not be satisfied" then "Requested node
#: configuration is not available" (PennLINC/babs #195), "Invalid qos
#: specification" (aidenlab/juicer #143), "Invalid account or
#: account/partition combination specified" (ArjunaCluster/ArjunaUsers #17).
SUBMISSION_REFUSED = (
    ('account', '--account'),
    ('partition', '--partition'),
    ('time', '--time'),
    ('qos', '--qos'),
    ('Memory specification', '--mem'),
    ('Node count', '--nodes'),
    ('node configuration', '--nodes, --gres, --mem or --constraint'),
    ('accounting/QOS policy', '--time, --nodes or --qos'),
)
_SLURM_REFUSAL = re.compile(r'^(?:sbatch|salloc|srun)(?:\.bin)?: error: ')


def submission_refused(text):
    '''A ``bad_input`` :class:`Triage` where Slurm refused the job (its
    first refusal line, :data:`BAD_INPUT`), naming the option to fix
    (:data:`SUBMISSION_REFUSED`); None.'''
    if 'error: ' not in text:
        return None
    for line in text.splitlines():
        line = line.strip()
        if _SLURM_REFUSAL.match(line) and classify(line) == 'bad_input':
            option = next((o for words, o in SUBMISSION_REFUSED
                           if words in line), None)
            fix = f' (Slurm refused the job: fix {option})' if option else ''
            return Triage('bad_input', _trim(line + fix))
    return None


#: Xids that report another fault, not their own: 45 (preemptive cleanup
#: after an earlier error), and 13, 31, 43 (a graphics exception, an MMU
#: fault, a stopped channel), which NVIDIA's catalog puts first on the
#: application. A log's other Xid is the cause where it has one.
_FOLLOWING_XIDS = {'13', '31', '43', '45'}
_XID = re.compile(r'NVRM: Xid \([^)]*\): (\d+)')


def _first_cause_xid(lines):
    '''The first of the hardware *lines* that is not an Xid reporting
    another fault (:data:`_FOLLOWING_XIDS`), else the first.'''
    for line in lines:
        xid = _XID.search(line)
        if not xid or xid.group(1) not in _FOLLOWING_XIDS:
            return line
    return lines[0]


def error_line(text):
    '''The line that says what went wrong in a log the failures parser
    finds no failure in (no traceback, launcher line or exit code: a log
    cut from an issue, NCCL's or argparse's own lines): its last
    exception, else the first error line a table classifies; None.'''
    line = failures.exception_line(text)
    if line:
        return line
    for line in _error_lines(text):
        if classify(line):
            return _nccl_words(line)
    return None


def _error_lines(text):
    '''The lines of *text* that report an error (:data:`_ERROR_LINE`),
    stripped.'''
    return [ln.strip() for ln in text.splitlines()
            if _ERROR_LINE.search(ln) and not _INFO_LINE.search(ln)]


def stronger_evidence(text, category):
    '''Where the root-cause line is only a consequence (a collective's
    failure, :data:`CONSEQUENCES`) or matches no table: the :class:`Triage`
    of another error line whose category comes earlier in :data:`ORDER`;
    None where there is none.'''
    if category is not None and category not in CONSEQUENCES:
        return None
    names = [name for name, _ in ORDER]
    limit = names.index(category or CONSEQUENCES[0])
    best = None
    for line in _error_lines(text):
        found = classify(line)
        if found is not None and names.index(found) < limit and (
                best is None or names.index(found) < names.index(best[0])):
            best = (found, _nccl_words(line))
    if best is None:
        return None
    found, line = best
    return Triage(found, _trim(line), *_where(line, None, text))


def non_finite(text, room=REASON_LIMIT):
    '''A ``numerics`` :class:`Triage` if the log shows a non-finite loss or
    gradient (:data:`NUMERICS`) or the loss scaler at its floor
    (:data:`MIN_LOSS_SCALE`), its reason in about *room* characters; else
    None.'''
    for line in text.splitlines():
        floor = _scale_at_floor(line) or _SCALE_AT_MINIMUM.search(line)
        match = floor or next((m for m in (p.search(line) for p in NUMERICS)
                               if m), None)
        if match:
            rank, node = _where(line, None, text)
            what = ('the loss scaler reached its floor' if floor else
                    'the loss or the gradients went non-finite')
            when = step_of(line)
            what += f' at {when}' if when else ''
            words = _excerpt(' '.join(line.split()), match.group(0),
                             room - len(what) - 2)
            return Triage('numerics', _trim(f'{what}: {words}'), rank, node)
    return None


#: Where a training line names its step, as the loops write it: an MLLOG
#: record's metadata ("step": 2), TensorFlow's "global step 2458",
#: Megatron's "iteration 5426/ 250000", "step 1655", "Iter 12", a progress
#: bar's "| 320/320 [" (tqdm, Lightning); else HF Trainer's "'epoch': 0.29".
_STEPS = (
    ('step', re.compile(r'"step(?:_num)?": (\d+)|\bglobal[ _]step[ :=]*(\d+)|'
                        r'\biteration +(\d+)|\b[Ss]tep[ :=#]*(\d+)|'
                        r'\b[Ii]ter(?:ation)?[ :=#]*(\d+)|\| *(\d+)/\d+ \[')),
    ('epoch', re.compile(r"'epoch': '?([\d.]+)")),
)


def step_of(line):
    '''``step N`` (or ``epoch E``) where *line* names its training step;
    None.'''
    for unit, pattern in _STEPS:
        match = pattern.search(line)
        if match:
            return f'{unit} {next(g for g in match.groups() if g)}'
    return None


#: How much of a long line a reason quotes before what matched in it.
_EXCERPT_BEFORE = 80


def _excerpt(line, matched, room):
    '''*line*, or where what matched in it ends past *room* characters (in
    an MLLOG record, say) its part that ends with *matched*: the reason
    then shows the NaN, not only the record's head.'''
    end = line.find(matched) + len(matched)
    if end <= room or matched not in line:
        return line
    start = max(0, end - len(matched) - _EXCERPT_BEFORE)
    return '...' + line[start:end] + ('...' if end < len(line) else '')


def _scale_at_floor(line):
    '''The match where *line* is the loss scaler reducing the scale to
    :data:`MIN_LOSS_SCALE` or below (apex's "Gradient overflow. Skipping
    step, loss scaler 0 reducing loss scale to 1.0", DeepSpeed's
    "Attempted loss scale: 1, reducing to 1"); None.'''
    match = _LOSS_SCALE_DOWN.search(line)
    try:
        return match if match and float(match.group(1)) <= MIN_LOSS_SCALE \
            else None
    except ValueError:
        return None


def _nccl_words(line):
    '''NCCL's WARN line as "NCCL on HOST (GPU N): message"; other lines
    as they are.'''
    match = _NCCL_LINE.match(line.strip())
    if not match:
        return line.strip()
    host, gpu, message = match.groups()
    return f'NCCL on {host} (GPU {gpu}): {message.strip()}'


def _where(line, cause, text):
    '''(rank, node) of a failure: the failed rank's where the failures
    parser found one, else what *line* names, else the rank of
    torchrun's label on it in *text*; None where unknown.'''
    if cause is not None:
        return cause.rank, cause.node
    rank = _RANK.search(line)
    node = _NODE.search(line)
    return (next(g for g in rank.groups() if g) if rank else
            _label(line, text),
            next(g for g in node.groups() if g) if node else None)


def _label(line, text):
    '''The rank a launcher's label gives the line of *text* that holds
    *line* ("[rank3]: torch.OutOfMemoryError: ...", :mod:`~hpctestlib_ml.
    parsers.labels`), or None.'''
    for whole in text.splitlines():
        found, rest = labels.split(whole)
        if found and line[:100] in rest:
            rank = labels.rank_of(found)
            if rank is not None:
                return rank
    return None


#: A rank killed by SIGKILL as the failures parser words it, and what the
#: reason adds: the category is inferred, not read in the log.
_SIGKILL = re.compile(r'died: Killed \(srun\)|killed by signal 9\b')
_SIGKILL_NOTE = ('; SIGKILL and no other cause in the log: most often the '
                 'out-of-memory killer')


def _trim(line):
    '''*line* stripped, cut at :data:`REASON_LIMIT` characters.'''
    line = line.strip()
    return line if len(line) <= REASON_LIMIT else line[:REASON_LIMIT] + '...'


def problems_category(problems):
    '''The category of a run that ended well but whose log shows
    *problems* (the workloads' one-line log problems): the first of
    :data:`ORDER` a problem matches, else :data:`DEFAULT_CATEGORY`.'''
    found = [classify(problem) for problem in problems]
    for category, _ in ORDER:
        if category in found:
            return category
    return DEFAULT_CATEGORY
