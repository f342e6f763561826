"""The precision each MLPerf-style workload trains in at benchmark size,
and the precision its upstream reference program trains in: one home for
the choice and its sources (docs/guide/fidelity.md, "Precision").

The reference programs (mlcommons/hpc 2c627d4, mlcommons/training's BERT
aa344c7) train in fp32; the closed-division submissions that centres
compare with train mixed. The benchmark size follows the submissions,
since that is the figure a centre holds its system against; the
reference's precision is one ``-S precision=`` away, and the perflog
carries both (``precision``, ``reference_precision``).

Precision names are the programs' (``--precision``): ``fp16`` and
``bf16`` are autocast mixed precision with fp32 weights (fp16 with a loss
scaler), ``fp32`` trains fp32 with TF32 matmuls on GPUs that have them,
as the references' ``tf32`` default (OpenFold) and PyTorch's convolution
default do (``src/device_choice.set_math_mode``).
"""
import dataclasses

#: The precisions of the suite's own programs (their ``--precision``
#: choices: ``src/mlperf_train``, ``bert_pretrain``, ``gpt2_finetune``,
#: ``resnet50_tf``, ``collectives``; ``gpt_pretrain``'s ``--fp16`` and
#: ``--bf16``, fp32 without either).
PROGRAM = ('fp32', 'fp16', 'bf16')

#: OpenCLIP's ``--precision`` choices (open_clip_train/params.py).
OPEN_CLIP = ('amp', 'amp_bf16', 'amp_bfloat16', 'bf16', 'fp16', 'pure_bf16',
             'pure_fp16', 'fp32')

#: What the torchvision program trains in by device: fp32, or with
#: ``--use-amp`` autocast's default type (fp16 on GPUs, bf16 on CPUs).
TORCHVISION = {'cpu': ('fp32', 'bf16'), 'gpu': ('fp32', 'fp16')}


@dataclasses.dataclass(frozen=True)
class PrecisionChoice:
    #: What the benchmark size trains in.
    benchmark: str
    #: What the upstream reference program trains in.
    reference: str
    #: Where the benchmark choice comes from (files read, with commits).
    basis: str


#: Per workload (the checks' ``workload``).
CHOICES = {
    'deeplabv3plus': PrecisionChoice(
        'fp16', 'fp32',
        'MLPerf HPC v3.0 closed DeepCAM (mlcommons/hpc_results_v3.0 '
        '350e46f): NVIDIA, Dell, HPE+LBNL and Clemson log precision_mode '
        '"amp", which NVIDIA\'s driver/trainer.py runs as fp16 autocast '
        '(bf16 only for "amp-bf16"); the reference (mlcommons/hpc deepcam, '
        'utils/parser.py) has no mixed precision'),
    'cosmoflow': PrecisionChoice(
        'fp16', 'fp32',
        'NVIDIA\'s MLPerf HPC v3.0 CosmoFlow (pytorch, configs/'
        'submission_dgx*.yaml amp: True; trainer.py torch.cuda.amp.autocast() '
        'with a GradScaler: fp16); the reference (mlcommons/hpc cosmoflow/'
        'train.py) trains fp32, fp16 (mixed_float16) only with --amp'),
    'bert': PrecisionChoice(
        'fp16', 'fp32',
        'MLPerf Training closed BERT: NVIDIA\'s pytorch implementation '
        '(training_results_v2.0-v4.0 run_and_time.sh --fp16, fp32 master '
        'weights in DistributedFusedLAMB, a loss scale), v4.0 Dell, HPE, '
        'Fujitsu, Supermicro, ASUSTeK --fp16; the reference (mlcommons/'
        'training aa344c7 retired_benchmarks/bert, TF) trains fp32'),
    'alphafold2': PrecisionChoice(
        'bf16', 'fp32',
        'MLPerf HPC v3.0 closed OpenFold: NVIDIA (eos) and HPE+LBNL '
        '(perlmutter) log precision "bf16", TACC and Clemson "tf32"; the '
        'reference (mlcommons/hpc openfold/train.py) defaults to tf32 and '
        'raises NotImplementedError for bf16/fp16/amp'),
}


def benchmark(workload):
    '''The precision *workload*'s benchmark size trains in.'''
    return CHOICES[workload].benchmark


def reference(workload):
    '''The upstream reference program's precision ('' where none is
    recorded here).'''
    choice = CHOICES.get(workload)
    return choice.reference if choice else ''
