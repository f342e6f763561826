"""What each phase of ``validate.sh run`` runs, and running it.

A phase is a ReFrame session on ``config/local.py``, on the machine's
``gpu`` partition (``local:cpu`` with ``--cpu``), one rank
(``scale=1_proc``, ``launch_mode=per_task``), every stage directory kept,
its own ``HPCML_VAR_DIR`` under ``OUT/<phase>/var`` and a run report
``OUT/<phase>/report-0.json``. Together the phases run every PyTorch
check that runs on one rank, and every precision each has, once, at
``--mode short`` (the benchmarks' models, batches and precisions), in
four device calls of about 5 minutes (:data:`CALLS`; ``phases.py --plan``
prints the arithmetic, docs/guide/gpu_validation.md the calls):

``probes``
    no ReFrame session: ``probes.py`` (torch, CUDA, driver, bf16, TF32,
    what ``config/local.py`` detects, the energy sampler, matrix rates).
``defaults-a``, ``defaults-b``
    every check in its default precision (the benchmark's: fp16 for the
    MLPerf-style three, AlphaFold2's bf16, CARAML's fp16 for Megatron
    800M, OpenCLIP's amp, fp32 for GPT-2 and ResNet-50), the MatmulRate
    and Storage components: timed windows of about 6.5 s or more, so
    that the energy is judged against the ``nvidia-smi`` trace. ``-a``:
    the MLPerf-style four and MatmulRate (and any check added since);
    ``-b``: Megatron, GPT-2, MMoCLIP, ResNet-50, Storage.
``variants-a``, ``variants-b``
    every other precision of each check of that half (bf16 and fp32, the
    reference programs', for the MLPerf-style four; Megatron bf16; GPT-2
    fp16 and bf16; OpenCLIP amp_bf16 and fp32; ResNet-50 with
    ``--use-amp``), run as a rank that Slurm bound to one GPU sees it:
    ``CUDA_VISIBLE_DEVICES=0 LOCAL_RANK=1`` (finding 1 of the GPU-path
    review: ``cuda:LOCAL_RANK`` is then an invalid ordinal), at full
    size. With LOCAL_RANK=1 the node has no first task, which starts the
    energy sampler (``src/task_env.sh``): no energy here, so timed
    windows of about 3 s.

Why four calls, not two: on the H100 (bench/results/gpuval-h100-
2026-11-26) a case cost 20-45 s besides its timed steps (process start
and imports, the synthetic data pool made on the CPU, the first step's
cuDNN autotuning, the evaluation's batches), 23 cases about 870 s in
all: more than two calls of 5 minutes, and more than the device time of
one session with the machine's start.

With ``--cpu`` the same sessions run at ``tiny`` size for 3 steps, the
variants in the precisions a CPU has beside its fp32 default (bf16; fp16
for Megatron's loss-scaler path): this is what CI runs.
"""
import dataclasses
import json
import math
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
    (docs/guide/gpu_validation.md).'''
    sys.path.insert(0, str(REPO))
    from hpctestlib_ml import registry
    return {declared.check: name
            for name, declared in registry.registered().items()
            if declared.framework == 'pytorch'
            and declared.min_world_size == 1}


@dataclasses.dataclass(frozen=True)
class CheckPlan:
    '''How the phases run one check on one GPU.'''
    #: Steps of its default-precision case (``defaults``).
    steps: int
    #: Its other precisions on a GPU (``variants``) and their steps.
    variants: tuple = ()
    variant_steps: int = None
    #: Its other precisions on a CPU (``--cpu``).
    cpu_variants: tuple = ()
    #: The variable or parameter that holds the precision.
    variable: str = 'precision'
    #: True where the precision is a parameter of the check (its cases
    #: are selected by name), else a variable (``-P CHECK.VAR=...``).
    parameter: bool = False
    #: The default case's precision ('' where it has none): where the
    #: precision is a parameter its case is selected by it.
    default: str = None
    #: More of the one case's name (a parameter that picks it).
    select: str = ''
    #: Measured on one GPU (bench/results/gpuval-h200-2026-11-26, and the
    #: H100's of 2026-11-26): seconds of a case besides its steps (start,
    #: imports, data pool, model build, first step's autotuning, the
    #: evaluation) and seconds a step, by precision: for --plan.
    fixed_s: float = 20.0
    step_s: dict = dataclasses.field(default_factory=dict)


#: Each check's plan. Steps: a window of about 6.5 s after the untimed
#: first step for the defaults (energy is judged over 5 s or more, 10
#: trace samples at 5 Hz), about 3 s (3 steps or more) for the variants;
#: AlphaFold2, about 3.3 s a step, 3 steps either way. Fixed costs and
#: step times as measured on the H100 (bench/results/gpuval-h100-
#: 2026-11-26: a case's run time less its steps; GPT-2's and the
#: unmeasured variants' from their nearest measured case), where the
#: fixed part (process start and imports, the synthetic data pool made
#: on the CPU, the first step's cuDNN autotuning, the evaluation's
#: batches) was about twice the H200's.
PLANS = {
    'BERTLarge': CheckPlan(60, ('bf16', 'fp32'), 25, ('bf16',),
                           default='fp16', fixed_s=20.3,
                           step_s={'fp16': 0.118, 'bf16': 0.108,
                                   'fp32': 0.2}),
    'CosmoFlow': CheckPlan(700, ('bf16', 'fp32'), 250, ('bf16',),
                           default='fp16', fixed_s=29.0,
                           step_s={'fp16': 0.0099, 'bf16': 0.0112,
                                   'fp32': 0.015}),
    # Its first case of a session autotunes cuDNN longer (59 s, then 42).
    'DeepLabV3Plus': CheckPlan(130, ('bf16', 'fp32'), 45, ('bf16',),
                               default='fp16', fixed_s=42.0,
                               step_s={'fp16': 0.0578, 'bf16': 0.0665,
                                       'fp32': 0.0779}),
    'AlphaFold2': CheckPlan(3, ('fp32',), 3, ('bf16',), default='bf16',
                            fixed_s=19.2, step_s={'bf16': 3.29,
                                                  'fp32': 3.29}),
    # CARAML's 800M (global batch 16), selected by name: Llama 3 8B (TP 1,
    # 8192 tokens: 86 GiB) does not fit one H100, and GPT-J 6B (TP 1: 109
    # GiB) would fit an H200 and spend the call's minutes on a model that
    # the validation does not check.
    'MegatronGPT': CheckPlan(12, ('bf16',), 6, ('fp16',), default='fp16',
                             select='%model_size=800M', fixed_s=31.0,
                             step_s={'fp16': 0.61, 'bf16': 0.637}),
    'GPT2FineTune': CheckPlan(100, ('fp16', 'bf16'), 50, (),
                              variable='train_precision', parameter=True,
                              default='fp32', fixed_s=33.0,
                              step_s={'fp32': 0.07, 'fp16': 0.07,
                                      'bf16': 0.07}),
    'MMoCLIP': CheckPlan(7, ('amp_bf16', 'fp32'), 4, ('amp_bf16',),
                         default='amp', fixed_s=34.6,
                         step_s={'amp': 1.18, 'amp_bf16': 1.17,
                                 'fp32': 2.55}),
    # EESSI's and CSCS's ResNet-50 at batch 32.
    'TorchvisionResNet50': CheckPlan(300, ('fp16',), 200, ('bf16',),
                                     default='fp32', fixed_s=30.0,
                                     step_s={'fp32': 0.0234,
                                             'fp16': 0.0269}),
    # Its benchmark's 10 iterations: each GPU precision warms up for 1 s
    # and its timed products last 2 s together (matmul_rate's size):
    # about 13 s for the four.
    'MatmulRate': CheckPlan(10, default='', fixed_s=5.0,
                            step_s={'': 1.26}),
    # 2 rounds of storage (4 GiB of data and Megatron 800M's 10.9 GB
    # checkpoint on the machine's disk, 0.75 GB/s there): the fewest it
    # runs.
    'Storage': CheckPlan(2, default='', fixed_s=12.0, step_s={'': 29.0}),
}

#: Steps of a check not in :data:`PLANS` (one added since: 100 steps).
DEFAULT_PLAN = CheckPlan(100)

#: The environment of a rank Slurm bound to one GPU (--gpus-per-task=1):
#: it sees one device, and its local rank is not 0.
BINDING_ENV = {'CUDA_VISIBLE_DEVICES': '0', 'LOCAL_RANK': '1'}

#: ReFrame's own limit of each case on the GPU (the sizes' are 15 min to
#: 2 h): one case that hangs must not take the phase's whole budget.
GPU_CASE_LIMIT = '3m'

#: ReFrame's own start and end of a session, and validate.sh's offline
#: install of the wheel set, measured (s): for --plan.
SESSION_S = 10.0
INSTALL_S = 21.0
PROBES_S = 34.0
#: Between two cases of a session (ReFrame's polling, the job's end).
BETWEEN_CASES_S = 3.0


def plan(check):
    return PLANS.get(check, DEFAULT_PLAN)


@dataclasses.dataclass
class Session:
    '''One ReFrame session of a phase: every PyTorch check, in its default
    precision or in its others (*variants*).'''
    variants: bool = False
    env: dict = dataclasses.field(default_factory=dict)
    #: Its checks: these (a function that names them, read when the
    #: session runs).
    group: object = None

    @property
    def names(self):
        '''The session's check classes (read when the session runs).'''
        return tuple(self.group() if callable(self.group) else
                     self.group or pytorch_checks())

    def precisions(self, check, cpu):
        '''The precisions of *check* this session runs: () for its
        default one, else its variants (none: not in this session).'''
        if not self.variants:
            return ()
        return plan(check).cpu_variants if cpu else plan(check).variants

    def checks(self, cpu):
        '''The session's checks on this device.'''
        return tuple(c for c in self.names
                     if not self.variants or self.precisions(c, cpu))

    def selection(self, check, cpu):
        '''The ``-n`` pattern of *check*'s cases in this session.'''
        chosen = plan(check)
        name = f'{check}%scale=1_proc%launch_mode=per_task'
        if chosen.parameter:
            values = self.precisions(check, cpu) or (chosen.default,)
            name += f'%{chosen.variable}=({"|".join(values)})'
        # A size that picks the case on a GPU; a CPU's is tiny.
        return name + ('' if cpu else chosen.select)

    def arguments(self, cpu):
        '''ReFrame's options for this session (besides the common ones).'''
        checks = self.checks(cpu)
        pattern = '|'.join(self.selection(c, cpu) for c in checks)
        args = ['-n', f'^({pattern})']
        if not cpu:
            args += ['-S', f'time_limit={GPU_CASE_LIMIT}', '--mode', 'short']
            for check in checks:
                chosen = plan(check)
                steps = (chosen.variant_steps or chosen.steps
                         if self.variants else chosen.steps)
                args += ['-S', f'{check}.steps={steps}']
            if 'MegatronGPT' in checks:
                args += ['-S', 'MegatronGPT.global_batch_size=16']
        else:
            args += ['-S', 'size=tiny', '-S', 'steps=3']
        for check in checks:
            chosen = plan(check)
            values = self.precisions(check, cpu)
            if values and not chosen.parameter:
                args += ['-P', f'{check}.{chosen.variable}='
                               f'{",".join(values)}']
        return args

    def case_count(self, cpu):
        '''How many cases the session runs.'''
        return sum(max(1, len(self.precisions(c, cpu)))
                   for c in self.checks(cpu))

    def estimate(self):
        '''[(check, precision, seconds)] on one GPU, from the measured
        step times and fixed costs.'''
        rows = []
        for check in self.checks(cpu=False):
            chosen = plan(check)
            steps = (chosen.variant_steps or chosen.steps
                     if self.variants else chosen.steps)
            for precision in (self.precisions(check, False) or
                              (chosen.default,)):
                step = chosen.step_s.get(
                    precision, max(chosen.step_s.values(), default=0.1))
                rows.append((check, precision, BETWEEN_CASES_S +
                             chosen.fixed_s + steps * step))
        return rows


#: The language models, CLIP, ResNet-50 and Storage: the second half of
#: each (halves of about equal time, --plan).
SECOND_HALF = ('MegatronGPT', 'GPT2FineTune', 'MMoCLIP',
               'TorchvisionResNet50', 'Storage')


def first_half():
    '''The MLPerf-style four, MatmulRate and any check added since.'''
    return tuple(c for c in pytorch_checks() if c not in SECOND_HALF)


def second_half():
    return tuple(c for c in pytorch_checks() if c in SECOND_HALF)


#: Phase -> its sessions, in order (``all`` runs the phases in this order).
PHASES = {
    'probes': [],
    'defaults-a': [Session(group=first_half)],
    'defaults-b': [Session(group=second_half)],
    'variants-a': [Session(variants=True, env=BINDING_ENV,
                           group=first_half)],
    'variants-b': [Session(variants=True, env=BINDING_ENV,
                           group=second_half)],
}

#: Phases whose ranks start no energy sampler: with LOCAL_RANK=1 the node
#: has no first task (src/task_env.sh starts it on local rank 0).
NO_ENERGY_PHASES = ('variants-a', 'variants-b')

#: The device calls docs/guide/gpu_validation.md names, each of at most
#: 5 minutes: the first two in one session of device time (15 minutes,
#: the machine's start included), the last two in the next.
CALLS = (('probes', 'defaults-a'), ('defaults-b',), ('variants-a',),
         ('variants-b',))


def print_plan():
    '''The arithmetic of the calls: each case's estimate on one GPU.'''
    for number, call in enumerate(CALLS):
        # A warm machine keeps the venv: the next call's install is quick.
        install = INSTALL_S if number % 2 == 0 else 2.0
        total = install
        print(f'call {",".join(call)}: offline install {install:.0f} s')
        for phase in call:
            if phase == 'probes':
                print(f'  probes {PROBES_S:.0f} s')
                total += PROBES_S
                continue
            for session in PHASES[phase]:
                total += SESSION_S
                print(f'  {phase}: ReFrame session {SESSION_S:.0f} s')
                for check, precision, seconds in session.estimate():
                    print(f'    {check} {precision}: {seconds:.0f} s')
                    total += seconds
        print(f'  call total about {total:.0f} s '
              f'({math.ceil(total / 60)} min)')


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
    (:func:`hpctestlib_ml.registry.gpt2_finetune.prepare.
    prepare_gpt2_stand_in`).'''
    from hpctestlib_ml.registry.gpt2_finetune import prepare
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
        if 'GPT2FineTune' in session.checks(cpu) and not cpu:
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
    if argv == ['--plan']:
        print_plan()
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
