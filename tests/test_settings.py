"""Every setting declared once (hpctestlib_ml.settings) and checked where
it is first read: the test variables at setup, before a job is written.

The rows are those of the bad-input review
(shared/reviews/badinput-2026-11-26.md) that were silently wrong or
unclear, with the values a user would try next; each must fail in one
line that names what is allowed and the fix.
"""
import re

import pytest

from conftest import BIN, REPO
from hpctestlib_ml import workloads

#: One case of each check: its file and -n pattern (1 rank, per task).
ONE = {name: (f'checks/{file}.py', f'^{name}%scale=1_proc%'
              f'launch_mode=per_task{extra}$')
       for name, file, extra in [
           ('CosmoFlow', 'cosmoflow', ''),
           ('MegatronGPT', 'megatron', '%model_size=tiny'),
           ('TorchvisionResNet50', 'torchvision_resnet50', ''),
           ('MMoCLIP', 'clip', ''),
           ('BERTLarge', 'bert', ''),
           ('GPT2FineTune', 'gpt2_finetune', '%train_precision=fp32'),
           ('Storage', 'storage', ''),
       ]}


def dry_run(run_reframe, check, *options, env=None):
    '''reframe --dry-run of *check*'s one-rank case on config/local.py.'''
    path, pattern = ONE[check]
    proc, _ = run_reframe(BIN / 'reframe', '-C', REPO / 'config/local.py',
                          '-c', REPO / path, '-n', pattern, '--dry-run',
                          *options, env=env)
    return proc


def reason(proc):
    found = re.findall(r'\* Reason: (.*)', proc.stdout)
    return found[0] if found else proc.stdout[-2000:] + proc.stderr


# Test variables (-S), at setup

@pytest.mark.integration
@pytest.mark.parametrize('check, option, message', [
    # Row 6: Megatron trained fp32 and logged fp8.
    ('MegatronGPT', 'precision=fp8', "precision of megatron on cpus must be "
     "one of fp32, fp16, bf16, got 'fp8': fix -S precision"),
    ('MegatronGPT', 'precision=bf17', "got 'bf17' (did you mean bf16?)"),
    # Found only when the job ran (after the queue wait on Slurm).
    ('CosmoFlow', 'precision=fp8', 'precision of cosmoflow on cpus must be '
     'one of fp32, fp16, bf16'),
    # The torchvision program's autocast type on CPUs is bf16.
    ('TorchvisionResNet50', 'precision=fp16', 'precision of '
     'torchvision_resnet50 on cpus must be one of fp32, bf16'),
    ('MMoCLIP', 'precision=amp_bf17', "(did you mean amp_bf16?)"),
    # Rows 19-21: a traceback, then 0 dropped and -1 exported as
    # OMP_NUM_THREADS=-1 into the case's history.
    ('CosmoFlow', 'threads_per_rank=abc', "threads_per_rank must be an "
     "integer >= 1, got 'abc': fix -S threads_per_rank"),
    ('CosmoFlow', 'threads_per_rank=0', "threads_per_rank must be an "
     "integer >= 1, got '0'"),
    ('CosmoFlow', 'threads_per_rank=-1', "threads_per_rank must be an "
     "integer >= 1, got '-1'"),
    # Other variables that ReFrame converted itself, with a traceback.
    ('CosmoFlow', 'memory_check=maybe', "memory_check must be true or "
     "false, got 'maybe': fix -S memory_check"),
    ('MegatronGPT', 'untie_embeddings=maybe', 'untie_embeddings must be '
     'true or false'),
    ('MegatronGPT', 'position_embedding_type=rotary', "position_embedding_"
     "type must be one of rope, learned_absolute, got 'rotary'"),
    ('TorchvisionResNet50', 'image_size=0', 'image_size must be an integer '
     '>= 1'),
    ('MMoCLIP', 'workers=-2', 'workers must be an integer >= 0'),
    ('GPT2FineTune', 'epochs=abc', 'epochs must be a number > 0'),
    ('BERTLarge', 'optimizer=adam', "optimizer must be one of lamb, adamw, "
     "got 'adam' (did you mean adamw?)"),
    ('CosmoFlow', 'model=referense', "model must be one of tiny, reference, "
     "got 'referense' (did you mean reference?)"),
    ('Storage', 'formats=npy,hdf5', "formats must be a comma-separated list "
     "of npy, npz, tfrecord, text, got ['npy', 'hdf5']"),
])
def test_bad_variable_fails_at_setup_in_one_line(run_reframe, check, option,
                                                 message):
    proc = dry_run(run_reframe, check, '-S', option)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert reason(proc).startswith('bad_input: '), reason(proc)
    assert message in reason(proc)
    assert 'Failing phase: setup' in proc.stdout
    assert 'Traceback' not in proc.stdout + proc.stderr


@pytest.mark.integration
@pytest.mark.parametrize('check, option, expected', [
    ('CosmoFlow', 'threads_per_rank=1', 'export OMP_NUM_THREADS=1'),
    ('MegatronGPT', 'precision=bf16', '--bf16'),
    ('MegatronGPT', 'memory_check=false', '-m gpt_pretrain'),
])
def test_good_values_still_reach_the_job(run_reframe, check, option,
                                         expected):
    path, pattern = ONE[check]
    proc, var = run_reframe(BIN / 'reframe', '-C', REPO / 'config/local.py',
                            '-c', REPO / path, '-n', pattern, '--dry-run',
                            '-S', option)
    assert proc.returncode == 0, proc.stdout[-2000:]
    script, = (var / 'stage').rglob('rfm_job.sh')
    assert expected in script.read_text()


@pytest.mark.integration
@pytest.mark.parametrize('mode', ['benchmark', 'short'])
def test_gpu_sizes_on_a_cpu_partition_are_skipped_with_the_reason(
        run_reframe, mode):
    '''Row 12: --mode benchmark on the CPU partition started the
    reference model for 100 steps with no word, while --mode short was
    skipped with a reason.'''
    proc = dry_run(run_reframe, 'CosmoFlow', '--mode', mode)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert re.search(rf'SKIP.*size {mode} runs the benchmark (model )?of '
                     rf'cosmoflow .* it is meant for GPU partitions; to run '
                     rf'it on local:cpu anyway', proc.stdout), \
        proc.stdout[-2000:]


# The declarations

def test_convert_names_what_is_allowed_and_the_fix():
    from hpctestlib_ml import settings
    declared = settings.variable('threads_per_rank', 'cosmoflow')
    assert settings.convert(declared, ' 4 ', 'fix -S x') == 4
    assert settings.convert(declared, None, 'fix -S x') is None
    for bad in ('abc', '0', '-1', '1.5', True):
        with pytest.raises(settings.SettingError, match=r'^threads_per_rank '
                           r'must be an integer >= 1, got .*: fix -S x$'):
            settings.convert(declared, bad, 'fix -S x')
    flag = settings.variable('memory_check', 'cosmoflow')
    assert [settings.convert(flag, v, '') for v in
            ('true', 'False', 'yes', '0', True)] == [True, False, True,
                                                     False, True]
    size = settings.variable('size', 'clip')
    with pytest.raises(settings.SettingError, match=r"got 'tinny' \(did "
                       r"you mean tiny\?\)"):
        settings.convert(size, 'tinny', '')


def test_every_variable_of_every_check_is_declared_or_recorded():
    '''One declaration each: every variable of the suite's checks (beyond
    ReFrame's own) is a declared setting or a value the suite records,
    and each declaration's default is the variable's.'''
    from hpctestlib_ml import settings
    import reframe.core.pipeline as pipeline
    reframe_own = set(pipeline.RegressionTest.var_space)
    declared = set()
    for declaration in workloads.registered().values():
        cls = declaration.test_class()
        for name in set(cls.var_space) - reframe_own:
            setting = settings.variable(name, declaration.name)
            if setting is None:
                assert name in settings.RECORDED, (declaration.name, name)
                continue
            declared.add((setting.name, setting.reader))
            default = cls.var_space[name].default_value
            if setting.name not in ('batch_size', 'steps', 'workload',
                                    'model') and default is not None:
                assert settings.convert(setting, default, '') == \
                    setting.default, (declaration.name, name)
    # ... and every declaration is some check's variable.
    assert set(settings.VARIABLES) == declared


def program_precisions(path):
    '''The ``--precision`` choices of the program at *path* (``src/``),
    read from its source: a literal, or ``list(NAME)`` of a module-level
    dict.'''
    import ast
    tree = ast.parse((REPO / 'src' / path).read_text())
    tables = {node.targets[0].id: node.value for node in tree.body
              if isinstance(node, ast.Assign) and
              isinstance(node.targets[0], ast.Name)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and node.args and
                isinstance(node.args[0], ast.Constant) and
                node.args[0].value == '--precision'):
            choices, = [k.value for k in node.keywords if k.arg == 'choices']
            if isinstance(choices, ast.Call):      # list(TABLE)
                choices = tables[choices.args[0].id].keys
                return tuple(ast.literal_eval(k) for k in choices)
            return tuple(ast.literal_eval(choices))
    raise AssertionError(f'no --precision in {path}')


@pytest.mark.parametrize('workload, program', [
    ('cosmoflow', 'mlperf_train/__init__.py'),
    ('deeplabv3plus', 'mlperf_train/__init__.py'),
    ('alphafold2', 'mlperf_train/__init__.py'),
    ('bert', 'bert_pretrain/__main__.py'),
    ('gpt2_finetune', 'gpt2_finetune/__main__.py'),
    ('resnet50', 'resnet50_tf/__main__.py'),
    ('collectives', 'collectives/__main__.py'),
])
def test_declared_precisions_are_the_programs_own(workload, program):
    declared = workloads.get(workload).precisions_on('gpu')
    assert sorted(declared) == sorted(program_precisions(program))


def test_declared_precisions_of_upstream_programs():
    '''OpenCLIP's --precision choices; Megatron's --fp16/--bf16 (fp32
    without either), in Megatron-Core's fallback as in Megatron-LM.'''
    import open_clip_train.params
    clip = workloads.get('clip').precisions_on('gpu')
    for choice in clip:
        assert open_clip_train.params.parse_args(
            ['--precision', choice]).precision == choice
    with pytest.raises(SystemExit):
        open_clip_train.params.parse_args(['--precision', 'fp8'])
    source = (REPO / 'src/gpt_pretrain/mcore_train.py').read_text()
    assert "p.add_argument('--bf16', action='store_true')" in source
    assert "p.add_argument('--fp16', action='store_true')" in source
    assert workloads.get('megatron').precisions_on('cpu') == (
        'fp32', 'fp16', 'bf16')


def test_rows_for_the_settings_page():
    from hpctestlib_ml import settings
    rows = list(settings.rows())
    kinds = {row[0] for row in rows}
    assert kinds == {settings.VARIABLE, settings.ENVIRONMENT,
                     settings.EXTRAS, settings.INTERNAL}
    names = {(row[0], row[1]) for row in rows}
    assert ('variable', 'threads_per_rank') in names
    assert ('environment', 'HPCML_GPUS_PER_NODE') in names
    assert ('extras', 'scales') in names
    for kind, name, type_, default, allowed, reader, doc in rows:
        assert doc and reader and allowed, name
        assert '\n' not in doc, name
