"""What each phase of ``validate.sh run`` runs, and running it.

A phase is one or more ReFrame sessions on ``config/local.py``, each on
the machine's ``gpu`` partition (``local:cpu`` with ``--cpu``), one rank
(``scale=1_proc``, ``launch_mode=per_task``), every stage directory kept,
its own ``HPCML_VAR_DIR`` under ``OUT/<phase>/var`` and a run report
``OUT/<phase>/report-<n>.json``:

``probes``
    no ReFrame session: ``probes.py`` (torch, CUDA, driver, bf16, TF32,
    what ``config/local.py`` detects, the energy sampler, matrix rates).
``binding``
    every PyTorch workload at ``tiny`` size as a rank that Slurm bound to
    one GPU sees it: ``CUDA_VISIBLE_DEVICES=0 LOCAL_RANK=1`` (finding 1 of
    the GPU-path review: ``cuda:LOCAL_RANK`` is then an invalid ordinal).
``mlperf``
    BERT-Large, CosmoFlow, DeepLabV3+, AlphaFold2 at ``--mode short``
    (the benchmarks' models, batches and precision), steps cut to fit.
``lm``
    Megatron 800M (global batch 16), GPT-2 124M fine-tuning in fp32, fp16
    and bf16, MMoCLIP ViT-L-14 (batch 512) at ``--mode short``.
``other``
    every other PyTorch check at ``--mode short`` (TorchvisionResNet50:
    EESSI's and CSCS's ResNet-50, the MatmulRate and Storage components,
    and any workload added since; not Collectives, which needs two GPUs).
``mlperf-precision``, ``lm-precision``
    the precisions beside each default: bf16 and fp32 (the reference
    programs' precision) for the MLPerf-style programs (whose defaults
    are fp16, AlphaFold2's bf16: ``hpctestlib_ml/precisions.py``),
    OpenCLIP's amp_bf16 and fp32, Megatron bf16.

With ``--cpu`` the same sessions run at ``tiny`` size for 3 steps (bf16
and amp_bf16 for the precision phases: the CPUs' default is fp32
already): this is what CI runs. Steps on the GPU are cut so that the
phases fit three device calls of 10 minutes, offline install included,
with the review's CPU-bound data generation (finding 5) still in place; a
phase that runs out of its budget stops its ReFrame session and says so.
"""
import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]



def pytorch_checks():
    '''The PyTorch checks (check class -> workload), as the workloads and
    components declare themselves (read when a phase runs: ``--list``
    needs no ReFrame), that run on one rank: the phases' sessions are one
    rank on the machine's one GPU (``scale=1_proc``), where a check of
    two ranks or more (Collectives: NCCL runs one rank per GPU) has no
    case. ResNet50TF is TensorFlow: no TF GPU wheel fits a device call
    (README, "First run on a GPU").'''
    sys.path.insert(0, str(REPO))
    from hpctestlib_ml import workloads
    return {declared.check: name
            for name, declared in workloads.registered().items()
            if declared.test_class().framework == 'pytorch'
            and declared.test_class().min_world_size == 1}


MLPERF = ('BERTLarge', 'CosmoFlow', 'DeepLabV3Plus', 'AlphaFold2')

LANGUAGE_AND_CLIP = ('MegatronGPT', 'GPT2FineTune', 'MMoCLIP')


def every_check():
    return tuple(pytorch_checks())


def other_checks():
    '''Every other PyTorch check (TorchvisionResNet50, and any workload
    added since): the ``other`` phase runs them at ``--mode short``.'''
    return tuple(c for c in pytorch_checks()
                 if c not in MLPERF + LANGUAGE_AND_CLIP)

#: The environment of a rank Slurm bound to one GPU (--gpus-per-task=1):
#: it sees one device, and its local rank is not 0.
BINDING_ENV = {'CUDA_VISIBLE_DEVICES': '0', 'LOCAL_RANK': '1'}

#: Steps of each case at --mode short on one GPU: enough for a timed
#: window of about 8 s or more (energy is judged over 5 s or more, 10
#: trace samples at 5 Hz), from the step times measured on an H200
#: (bench/results/gpuval-h200-2026-11-26): BERT-Large 0.099 s (fp16),
#: CosmoFlow 0.009 s, DeepLabV3+ 0.046 s (fp16; 0.066 bf16, 0.071 fp32),
#: AlphaFold2 2.7 s, Megatron 800M 0.59 s (global batch 16), GPT-2 124M
#: 0.066 s, ViT-L-14 at batch 512 1.06 s (2.3 s in fp32). The first run's
#: 20 CosmoFlow and DeepLabV3+ steps timed 0.2 s and 0.9 s: too short for
#: an energy figure.
GPU_STEPS = {'BERTLarge': 100, 'CosmoFlow': 1000, 'DeepLabV3Plus': 200,
             'AlphaFold2': 10, 'MegatronGPT': 15, 'GPT2FineTune': 150,
             'MMoCLIP': 20,
             # The components: 30 timed iterations of 10 products per
             # precision, a window of about 8 s on an H100 (estimated from
             # its data sheet at 80 %: fp32's 8192^3 products take 22 ms,
             # bf16's 1.4 ms), and 2 rounds of storage (4 GiB of data and
             # Megatron 800M's 10.9 GB checkpoint on the machine's disk).
             'MatmulRate': 30, 'Storage': 2}

#: Steps of a check not in :data:`GPU_STEPS` (ResNet-50 at batch 32: about
#: 30 ms a step on an H100, estimated from EESSI's and CSCS's figures).
DEFAULT_GPU_STEPS = 300

#: The precision variants (a second and third run of the same model):
#: the same windows where their steps are as fast, fewer where slower.
GPU_PRECISION_STEPS = {'BERTLarge': 60, 'CosmoFlow': 800,
                       'DeepLabV3Plus': 120, 'AlphaFold2': 5,
                       'MegatronGPT': 15, 'MMoCLIP': 10}

#: ReFrame's own limit of each case on the GPU (the sizes' are 15 min to
#: 2 h): one case that hangs must not take the phase's whole budget.
GPU_CASE_LIMIT = '4m'


@dataclasses.dataclass
class Session:
    '''One ReFrame session of a phase.'''
    #: The check classes, or a function that names them (read when the
    #: session runs).
    checks: object
    #: precision -> values (``-P``): on the GPU, and with --cpu.
    gpu_precisions: tuple = ()
    cpu_precisions: tuple = ()
    env: dict = dataclasses.field(default_factory=dict)
    tiny: bool = False
    steps: dict = dataclasses.field(default_factory=lambda: GPU_STEPS)
    #: GPT2FineTune reads gpt2 and WikiText-2 from a prepared directory
    #: at short size.
    needs_gpt2: bool = False

    @property
    def names(self):
        '''The session's check classes.'''
        return self.checks() if callable(self.checks) else self.checks

    def arguments(self, cpu):
        '''ReFrame's options for this session (besides the common ones).'''
        pattern = '|'.join(self.names)
        args = ['-n', f'^({pattern})%scale=1_proc%launch_mode=per_task']
        if not cpu:
            args += ['-S', f'time_limit={GPU_CASE_LIMIT}']
        if cpu or self.tiny:
            args += ['-S', 'size=tiny', '-S', 'steps=3']
        else:
            args += ['--mode', 'short']
            for check in self.names:
                steps = self.steps.get(check, DEFAULT_GPU_STEPS)
                args += ['-S', f'{check}.steps={steps}']
            if 'MegatronGPT' in self.names:
                # CARAML's 800M; Llama 3 8B (TP 1, 8192 tokens: 86 GiB)
                # does not fit one H100, and the memory check would say so;
                # GPT-J 6B (TP 1: 109 GiB) would fit an H200 and spend the
                # phase's minutes on a model the phase does not check.
                args += ['-S', 'MegatronGPT.global_batch_size=16',
                         '-x', 'model_size=(llama3|gptj)']
        precisions = self.cpu_precisions if cpu else self.gpu_precisions
        if precisions:
            args += ['-P', f'precision={",".join(precisions)}']
        return args


#: Phase -> its sessions, in order (``all`` runs the phases in this order).
PHASES = {
    'probes': [],
    'binding': [Session(every_check, env=BINDING_ENV, tiny=True)],
    'mlperf': [Session(MLPERF)],
    'lm': [Session(LANGUAGE_AND_CLIP, needs_gpt2=True)],
    'other': [Session(other_checks)],
    'mlperf-precision': [Session(MLPERF, ('bf16', 'fp32'), ('bf16',),
                                 steps=GPU_PRECISION_STEPS)],
    'lm-precision': [
        Session(('MMoCLIP',), ('amp_bf16', 'fp32'), ('amp_bf16',),
                steps=GPU_PRECISION_STEPS),
        # 800M's own precision is CARAML's fp16 (the lm phase): bf16 here;
        # on the CPU fp16, its loss scaler and fp32 main weights.
        Session(('MegatronGPT',), ('bf16',), ('fp16',),
                steps=GPU_PRECISION_STEPS),
    ],
}

#: Phases whose ranks start no energy sampler: with LOCAL_RANK=1 the node
#: has no first task (src/task_env.sh starts it on local rank 0).
NO_ENERGY_PHASES = ('binding',)


def wheel_phases():
    '''[(phase, workloads)] for the wheel sets (wheelsets.py).'''
    checks = pytorch_checks()
    return [(phase, sorted({checks[c] for s in sessions for c in s.names}))
            for phase, sessions in PHASES.items()]


def prepare_gpt2(root):
    '''What ``hpcml prepare gpt2_finetune`` would fetch, made offline under
    *root* (once): the published gpt2 configuration (124M parameters,
    random weights: the throughput is the model's, the perplexity means
    nothing) and the program's generated corpus with its tokenizer, as
    many blocks as WikiText-2 makes, so that an epoch is as many steps
    (:func:`hpctestlib_ml.prepare.prepare_gpt2_stand_in`).'''
    from hpctestlib_ml import prepare
    # Local files only: no hub lookup that waits on a network there is not.
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    os.environ.setdefault('HF_DATASETS_OFFLINE', '1')
    return prepare.prepare_gpt2_stand_in(root, prepare.WIKITEXT2_BLOCKS)


def run_session(session, number, phase_dir, cpu, deadline, extra, env):
    '''Run one session under the phase's *deadline* (Unix s); its entry
    for ``phase.json``.'''
    report = phase_dir / f'report-{number}.json'
    command = [os.path.join(os.path.dirname(sys.executable), 'reframe'),
               '-C', str(REPO / 'config' / 'local.py'),
               '-c', str(REPO / 'checks'), '-r',
               '--system', 'local:cpu' if cpu else 'local:gpu',
               '--keep-stage-files', '--report-file', str(report),
               *session.arguments(cpu), *extra]
    entry = {'command': command, 'env': session.env, 'report': report.name}
    left = deadline - time.time()
    if left < 30:
        entry['status'] = f'not run: {left:.0f} s left of the phase budget'
        return entry
    started = time.time()
    with open(phase_dir / f'reframe-{number}.log', 'w') as log:
        proc = subprocess.Popen(command, cwd=REPO, stdout=log,
                                stderr=subprocess.STDOUT,
                                env={**env, **session.env},
                                start_new_session=True)
        try:
            entry['exit_code'] = proc.wait(
                timeout=None if left == float('inf') else left)
            entry['status'] = 'ran'
        except subprocess.TimeoutExpired:
            # ReFrame stops its jobs on SIGTERM and writes its report.
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            entry['status'] = (f'stopped at the phase budget after '
                               f'{time.time() - started:.0f} s')
    entry['seconds'] = round(time.time() - started, 1)
    return entry


def run_phase(phase, out, cpu, deadline, extra=()):
    '''Run *phase*'s sessions into ``OUT/<phase>``; writes ``phase.json``.'''
    phase_dir = pathlib.Path(out) / phase
    phase_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, 'HPCML_VAR_DIR': str(phase_dir / 'var'),
           'HPCML_CACHE_DIR': str(pathlib.Path(out) / 'cache')}
    env.pop('RFM_CONFIG_FILES', None)
    record = {'phase': phase, 'cpu': cpu, 'started': time.time(),
              'sessions': []}
    for number, session in enumerate(PHASES[phase]):
        if session.needs_gpt2 and not cpu:
            env['HPCML_PREPARED_DIR'] = str(
                prepare_gpt2(REPO / 'var' / 'gpuval' / 'gpt2-wikitext2'))
        record['sessions'].append(run_session(session, number, phase_dir,
                                              cpu, deadline, extra, env))
    record['stopped'] = time.time()
    (phase_dir / 'phase.json').write_text(json.dumps(record, indent=1))
    return record


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(description='Run one phase of '
                                     'bench/gpu/validate.sh')
    parser.add_argument('phase', choices=[p for p in PHASES if p != 'probes'])
    parser.add_argument('out')
    parser.add_argument('--cpu', action='store_true')
    parser.add_argument('--deadline', type=float, default=float('inf'),
                        help='Unix time by which the phase must end')
    argv = sys.argv[1:] if argv is None else argv
    if argv == ['--list']:            # for validate.sh
        print(' '.join(PHASES))
        return
    extra = []
    if '--' in argv:                  # more ReFrame options
        extra = argv[argv.index('--') + 1:]
        argv = argv[:argv.index('--')]
    args = parser.parse_args(argv)
    record = run_phase(args.phase, args.out, args.cpu, args.deadline, extra)
    for entry in record['sessions']:
        print(f'{args.phase}: session {entry["report"]}: {entry["status"]}'
              + (f', ReFrame exit code {entry["exit_code"]}'
                 if 'exit_code' in entry else ''))


if __name__ == '__main__':
    main()
