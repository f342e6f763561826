"""Every setting declared once (hpctestlib_ml.settings) and checked where
it is first read: the test variables at setup, before a job is written.

The rows are those of the bad-input review
(shared/reviews/badinput-2026-11-26.md) that were silently wrong or
unclear, with the values a user would try next; each must fail in one
line that names what is allowed and the fix.
"""
import re

import pytest

from conftest import BIN, REPO, check_class
from hpctestlib_ml import registry

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
           ('DeepLabV3Plus', 'deeplabv3plus', ''),
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
    # GPT-2's precision is its parameter: the case trained fp32 and
    # logged fp32, whatever -S said.
    ('GPT2FineTune', 'precision=fp16', "precision is the parameter "
     "train_precision of GPT2FineTune: select it with -n "
     "'^GPT2FineTune%.*train_precision=fp16', not -S precision"),
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
    # Issue 40: more loader processes than CPUs, each a copy of the rank.
    ('MMoCLIP', 'workers=4096', '-S workers=4096: more data-loader workers '
     'than the CPUs a rank has'),
    ('GPT2FineTune', 'epochs=abc', 'epochs must be a number > 0'),
    ('BERTLarge', 'optimizer=adam', "optimizer must be one of lamb, adamw, "
     "got 'adam' (did you mean adamw?)"),
    ('CosmoFlow', 'model=referense', "model must be one of tiny, reference, "
     "got 'referense' (did you mean reference?)"),
    ('Storage', 'formats=npy,hdf5', "formats must be a comma-separated list "
     "of npy, npz, tfrecord, text, got ['npy', 'hdf5']"),
    # Second round, row 9: overwritten by the placement without a word
    # (the perflog said gpus_per_node 0).
    ('CosmoFlow', 'num_gpus_per_node=4', '-S num_gpus_per_node=4 is not '
     "read: the suite sets it (0 here): the GPUs a node come from the "
     "partition's devices"),
    ('CosmoFlow', 'num_tasks=8', '-S num_tasks=8 is not read: the suite '
     'sets it (1 here): the tasks come from the scale and launch mode'),
    # Row 18: logged as the provenance of a run that used no container.
    ('CosmoFlow', 'container_image=/nonexistent.sif', '-S container_image='
     '/nonexistent.sif: CosmoFlow runs no container: give it to its twin, '
     '-S CosmoFlowContainer.container_image=..., or drop it'),
    # A bound no watch can keep: the case would have run unwatched, or
    # been ended at its first step.
    ('CosmoFlow', 'hang_bound_s=-5', "hang_bound_s must be a number >= 0, "
     "got '-5': fix -S hang_bound_s"),
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
def test_the_hang_bound_reaches_the_job_or_turns_the_watch_off(run_reframe):
    '''About 15 s (two dry runs). HPCML_HANG_BOUND_S is every case's
    bound unless -S sets it; 0 writes no watch into the job.'''
    path, pattern = ONE['CosmoFlow']
    scripts = []
    for options in ([], ['-S', 'hang_bound_s=0']):
        proc, var = run_reframe(
            BIN / 'reframe', '-C', REPO / 'config/local.py', '-c',
            REPO / path, '-n', pattern, '--dry-run', *options,
            env={'HPCML_HANG_BOUND_S': '45'})
        assert proc.returncode == 0, proc.stdout[-2000:]
        script, = (var / 'stage').rglob('rfm_job.sh')
        scripts.append((script.parent, script.read_text()))
    (stage, watched), (_, off) = scripts
    assert 'export HPCML_HANG_BOUND_S=45\n' in watched
    assert f'export HPCML_HANG_DIR={stage}/hpcml_hang\n' in watched
    assert 'HPCML_HANG_BOUND_S' not in off and 'HPCML_HANG_DIR' not in off


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
    declared = registry.variable('threads_per_rank', 'cosmoflow')
    assert settings.convert(declared, ' 4 ', 'fix -S x') == 4
    assert settings.convert(declared, None, 'fix -S x') is None
    for bad in ('abc', '0', '-1', '1.5', True):
        with pytest.raises(settings.SettingError, match=r'^threads_per_rank '
                           r'must be an integer >= 1, got .*: fix -S x$'):
            settings.convert(declared, bad, 'fix -S x')
    flag = registry.variable('memory_check', 'cosmoflow')
    assert [settings.convert(flag, v, '') for v in
            ('true', 'False', 'yes', '0', True)] == [True, False, True,
                                                     False, True]
    size = registry.variable('size', 'clip')
    with pytest.raises(settings.SettingError, match=r"got 'tinny' \(did "
                       r"you mean tiny\?\)"):
        settings.convert(size, 'tinny', '')


@pytest.mark.parametrize('text, seconds', [
    ('2h', 7200), ('1d12h', 129600), ('90m', 5400), ('1h30m15s', 5415),
    ('24:00:00', 86400), ('1-12:00:00', 129600), ('30:00', 1800),
    (3600, 3600),
])
def test_durations_in_reframes_or_slurms_form(text, seconds):
    '''A partition's MaxTime as ReFrame or Slurm writes it (a Python
    number: seconds, as ReFrame reads one).'''
    from hpctestlib_ml import settings
    setting = settings.EXTRAS_KEYS['max_time_limit']
    assert settings.convert(setting, text, 'fix') == seconds
    assert settings.convert(setting, settings.duration_text(seconds),
                            'fix') == seconds


@pytest.mark.parametrize('text', ['120', '2 hours', '0h', '', '-1h',
                                  '1-2:3:4:5', 'x-12'])
def test_what_is_no_duration_is_refused(text):
    from hpctestlib_ml import settings
    with pytest.raises(settings.SettingError, match="must be a time such "
                       "as 2h, 90m, 1d12h or Slurm's 24:00:00"):
        settings.convert(settings.EXTRAS_KEYS['max_time_limit'], text,
                         'fix it')


def test_every_variable_of_every_check_is_declared_or_recorded():
    '''One declaration each: every variable of the suite's checks (beyond
    ReFrame's own) is a declared setting or a value the suite records,
    and each declaration's default is the variable's.'''
    from hpctestlib_ml import settings
    import reframe.core.pipeline as pipeline
    reframe_own = set(pipeline.RegressionTest.var_space)
    declared = set()
    for declaration in registry.registered().values():
        cls = check_class(declaration)
        for name in set(cls.var_space) - reframe_own:
            setting = declaration.variable(name)
            if setting is None:
                assert name in registry.recorded(), (declaration.name, name)
                continue
            declared.add((setting.name, setting.reader))
            default = cls.var_space[name].default_value
            if setting.name not in ('batch_size', 'steps', 'workload',
                                    'model') and default is not None:
                assert settings.convert(setting, default, '') == \
                    setting.default, (declaration.name, name)
    # ... and every declaration is some check's variable.
    assert set(registry.all_variables()) == declared


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
    declared = registry.get(workload).precisions_on('gpu')
    assert sorted(declared) == sorted(program_precisions(program))


def test_declared_precisions_of_upstream_programs():
    '''OpenCLIP's --precision choices; Megatron's --fp16/--bf16 (fp32
    without either), in Megatron-Core's fallback as in Megatron-LM.'''
    import open_clip_train.params
    clip = registry.get('clip').precisions_on('gpu')
    for choice in clip:
        assert open_clip_train.params.parse_args(
            ['--precision', choice]).precision == choice
    with pytest.raises(SystemExit):
        open_clip_train.params.parse_args(['--precision', 'fp8'])
    source = (REPO / 'src/gpt_pretrain/mcore_train.py').read_text()
    assert "p.add_argument('--bf16', action='store_true')" in source
    assert "p.add_argument('--fp16', action='store_true')" in source
    assert registry.get('megatron').precisions_on('cpu') == (
        'fp32', 'fp16', 'bf16')


def test_rows_for_the_settings_page():
    from hpctestlib_ml import settings
    rows = list(registry.setting_rows())
    kinds = {row[0] for row in rows}
    assert kinds == {settings.VARIABLE, settings.ENVIRONMENT,
                     settings.EXTRAS, settings.INTERNAL}
    names = {(row[0], row[1]) for row in rows}
    assert ('variable', 'threads_per_rank') in names
    assert ('environment', 'HPCML_GPUS_PER_NODE') in names
    assert ('extras', 'scales') in names
    # the workloads' own, from their declarations
    assert ('variable', 'tensor_parallel') in names
    assert ('extras', 'megatron_lm') in names
    for kind, name, type_, default, allowed, reader, doc in rows:
        assert doc and reader and allowed, name
        assert '\n' not in doc, name


# Site settings: HPCML_* variables and partition extras, as the
# configuration loads

#: config/slurm.py as the review ran it (SL): a GPU partition of 4 A100s
#: (of 80 GB: docs-review-2026-11-28.md).
SLURM_ENV = {'HPCML_GPUS_PER_NODE': '4', 'HPCML_CPUS_PER_NODE': '64',
             'HPCML_GPU_MODEL': 'A100', 'HPCML_DEVICE_MEMORY_GIB': '80'}

ANSI = re.compile(r'\x1b\[[0-9;]*m')


def config_error(proc):
    '''The one line ReFrame printed for a configuration that did not load.'''
    text = ANSI.sub('', proc.stdout + proc.stderr)
    assert 'Traceback' not in text, text[-3000:]
    lines = [line for line in text.splitlines() if 'ERROR' in line]
    assert len(lines) == 1, text[-3000:]
    prefix = 'ERROR: failed to load configuration: '
    assert lines[0].startswith(prefix), lines
    return lines[0][len(prefix):]


def slurm_dry_run(run_reframe, config='config/slurm.py', **env):
    return run_reframe(
        BIN / 'reframe', '-C', REPO / config, '-c',
        REPO / 'checks/cosmoflow.py', '-n',
        '^CosmoFlow%scale=1_node%launch_mode=per_task', '--dry-run',
        env={**SLURM_ENV, **env})[0]


@pytest.mark.parametrize('env, message', [
    # Row 25: a 30-line traceback.
    ({'HPCML_GPUS_PER_NODE': 'abc'}, "HPCML_GPUS_PER_NODE must be an integer "
     ">= 0, got 'abc': fix the environment variable HPCML_GPUS_PER_NODE "
     "(read by config/slurm.py)"),
    # Row 27: 0 cases, rc 0, nothing said.
    ({'HPCML_GPUS_PER_NODE': '-4'}, "HPCML_GPUS_PER_NODE must be an integer "
     ">= 0, got '-4'"),
    # Rows 30, 31: tracebacks.
    ({'HPCML_ENV': 'NCCL_SOCKET_IFNAME'}, "HPCML_ENV must be shell words "
     "NAME=value, got 'NCCL_SOCKET_IFNAME' ('NCCL_SOCKET_IFNAME' is not "
     "NAME=value): fix the environment variable HPCML_ENV"),
    ({'HPCML_ENV': 'NCCL_SOCKET_IFNAME="ib0'}, "(not shell words (No "
     "closing quotation))"),
    # Row 32: 0 cases, the unknown scale not named.
    ({'HPCML_SCALES': '1_nodes'}, "HPCML_SCALES must be a comma-separated "
     "list of 1_proc, 2_procs, 1_node, 2_nodes, 4_nodes, 8_nodes, 16_nodes, "
     "got '1_nodes' (did you mean 1_node?)"),
    # Row 34: 0 cases, nothing said.
    ({'HPCML_MAX_NODES': '0'}, "HPCML_MAX_NODES must be an integer >= 1, "
     "got '0'"),
    # A noise floor is a percentage (the floor of hpcml references).
    ({'HPCML_REFERENCE_NOISE_PCT': '150'}, "HPCML_REFERENCE_NOISE_PCT must "
     "be a number > 0 and < 100, got '150'"),
    # Scales that are known but that the partition cannot run.
    ({'HPCML_SCALES': '4_nodes,8_nodes'}, "partition slurm:default can run "
     "no test case: its extras['scales'] (4_nodes, 8_nodes) misfit: "
     "4_nodes: 4 nodes requested but partition slurm:default allows 2"),
    ({'HPCML_GPU_PER_NODE': '4'}, 'HPCML_GPU_PER_NODE is set, but the suite '
     'reads no such variable (did you mean HPCML_GPUS_PER_NODE?)'),
    ({'HPCML_CPU_PEAK_FLOPS': 'fast'}, 'HPCML_CPU_PEAK_FLOPS must be a '
     "number > 0, got 'fast'"),
    ({'HPCML_LOG_LEVEL': 'loud'}, 'HPCML_LOG_LEVEL must be one of critical, '
     'error, warning, info, verbose, debug, debug2, undefined'),
    # Read by every check: refused once, as the configuration loads.
    ({'HPCML_HANG_BOUND_S': 'soon'}, "HPCML_HANG_BOUND_S must be a number "
     ">= 0, got 'soon': fix the environment variable HPCML_HANG_BOUND_S"),
    # Every check would have run without its references, and passed.
    ({'HPCML_REFERENCES_DIR': '/nonexistent/references'},
     'HPCML_REFERENCES_DIR /nonexistent/references: No such directory (the '
     'reference files the checks read): fix the environment variable '
     'HPCML_REFERENCES_DIR'),
    # Row 36 (clear before, stays clear).
    ({'HPCML_SCHEDULER': 'slurmm'}, "HPCML_SCHEDULER must be one of slurm, "
     "squeue, got 'slurmm' (did you mean slurm?)"),
])
def test_bad_site_variable_stops_the_config_in_one_line(run_reframe, env,
                                                        message):
    proc = slurm_dry_run(run_reframe, **env)
    assert proc.returncode == 1
    assert message in config_error(proc)


def test_gpu_partition_without_cpus_or_sinfo_in_one_line(run_reframe):
    '''Row 26: a traceback ending in the right message.'''
    import os
    path = ':'.join(p for p in os.environ['PATH'].split(':')
                    if not os.path.exists(os.path.join(p, 'sinfo')))
    proc = slurm_dry_run(run_reframe, HPCML_CPUS_PER_NODE='', PATH=path)
    assert proc.returncode == 1
    assert config_error(proc).startswith(
        'CPUs per node of the GPU partition (default) unknown (sinfo is not '
        'on PATH): set HPCML_CPUS_PER_NODE')


def test_hpcml_suite_names_the_unknown_scale(run_reframe):
    '''Row 33: hpcml suite gave a checklist of where 0 cases may come
    from.'''
    proc, _ = run_reframe(BIN / 'hpcml', 'suite', '-C', REPO /
                          'config/slurm.py', '--dry-run', '-n', '^CosmoFlow',
                          env={**SLURM_ENV, 'HPCML_SCALES': '1_nodes'})
    assert proc.returncode == 1
    assert "got '1_nodes' (did you mean 1_node?)" in config_error(proc)


def local_config_with(tmp_path, old, new):
    '''A copy of config/local.py with *old* replaced by *new*.'''
    text = (REPO / 'config/local.py').read_text()
    assert old in text
    path = tmp_path / 'site.py'
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize('new, message', [
    # Row 37: 3 cases listed, not the 1 asked for.
    ("'scale': ['2_procs']", "extras key 'scale' of partition local:cpu is "
     "not one the suite reads (did you mean scales?): fix it in "),
    ("'scales': ['2_proc']", "extras['scales'] of partition local:cpu must "
     "be a comma-separated list of 1_proc, 2_procs, 1_node, 2_nodes, "
     "4_nodes, 8_nodes, 16_nodes, got ['2_proc'] (did you mean 2_procs?)"),
    ("'scales': ['4_nodes']", "partition local:cpu can run no test case: "
     "its extras['scales'] (4_nodes) misfit: 4_nodes: 4 nodes requested but "
     "partition local:cpu allows 1"),
])
def test_bad_partition_extras_stop_the_config_in_one_line(run_reframe,
                                                          tmp_path, new,
                                                          message):
    config = local_config_with(tmp_path, "'scales': ['1_proc', '2_procs']",
                               new)
    proc, _ = run_reframe(BIN / 'reframe', '-C', config, '-c',
                          REPO / 'checks/cosmoflow.py', '-l')
    assert proc.returncode == 1
    assert message in config_error(proc)
    assert f'fix it in {config}' in config_error(proc)


@pytest.mark.parametrize('env', [
    {'HPCML_RENDEZVOUS_ADDRESS': '{hostname}-ib'},
    {'HPCML_SCALES': '1_node', 'HPCML_MAX_NODES': '4'},
    {'HPCML_GPUS_PER_NODE': '0', 'HPCML_CPUS_PER_NODE': '',
     'HPCML_GPU_MODEL': '', 'HPCML_DEVICE_MEMORY_GIB': ''},
    {'HPCML_GPU_RESOURCE': '--gres=gpu:{num_gpus_per_node}',
     'HPCML_ACCOUNT': 'proj-123', 'HPCML_CPUS_PER_NODE': '4'},
])
def test_good_site_settings_still_load(run_reframe, env):
    proc = slurm_dry_run(run_reframe, **env)
    assert proc.returncode == 0, ANSI.sub('', proc.stdout)[-2000:]


def code_files():
    for folder in ('hpctestlib_ml', 'config', 'checks', 'src', 'tests',
                   'bench'):
        for path in (REPO / folder).rglob('*'):
            if path.suffix in ('.py', '.sh') and path.is_file():
                yield path


def test_every_hpcml_variable_and_extras_key_in_the_code_is_declared():
    '''One declaration each: an HPCML_* name or an extras key the code
    reads without a declaration would be refused as unknown.'''
    from hpctestlib_ml import settings
    names, keys = set(), set()
    for path in code_files():
        text = path.read_text(errors='replace')
        names |= set(re.findall(r'\bHPCML_[A-Z0-9_]*[A-Z0-9]\b', text))
        if path.suffix == '.py' and 'tests' not in path.parts:
            keys |= set(re.findall(r"extras(?:\.get\(|\[)'(\w+)'", text))
    names -= {'HPCML_FOO', 'HPCML_GPU_PER_NODE'}   # this file's typos
    assert names - set(settings.ENVIRONMENT_VARIABLES) == set()
    assert keys - set(registry.extras_keys()) == set()


# hpcml suite: ReFrame's warnings that hide a mistake are errors

def suite(run_reframe, *args, env=None):
    proc, var = run_reframe(BIN / 'hpcml', 'suite', *args, env=env)
    return proc, var


def suite_error(proc):
    '''The lines hpcml suite said of what is wrong (no traceback).'''
    text = ANSI.sub('', proc.stdout + proc.stderr)
    assert 'Traceback' not in text, text[-3000:]
    return [line for line in text.splitlines()
            if line.startswith('hpcml suite: ')]


COSMOFLOW = ['-c', REPO / 'checks/cosmoflow.py', '-n',
             '^CosmoFlow%scale=1_proc%launch_mode=per_task$']
MEGATRON = ['-c', REPO / 'checks/megatron.py', '-n',
            '^MegatronGPT%scale=1_proc%launch_mode=per_task%model_size=tiny$']


@pytest.mark.parametrize('args, message', [
    # Row 11: ReFrame's bare "invalid mode: 'huge'".
    ([*COSMOFLOW, '--mode', 'huge', '-l'], "--mode huge: no such mode: use "
     "one of smoke, short, benchmark (the modes of the site configuration)"),
    ([*COSMOFLOW, '--mode=smok', '-l'], "--mode smok: no such mode (did you "
     "mean smoke?)"),
    # Row 13: a warning, then model_size=tiny ran and passed.
    ([*MEGATRON, '-S', 'model_size=7B', '-l'], "-S model_size: model_size is "
     "a parameter of MegatronGPT, not a variable: select its value with -n "
     "'^MegatronGPT%.*model_size=7B'"),
    # Row 18: a warning, then the default ran and passed.
    ([*COSMOFLOW, '-S', 'batchsize=4', '-l'], '-S batchsize: no variable '
     'batchsize in any selected test (did you mean batch_size?)'),
    ([*COSMOFLOW, '-S', 'CosmoFlow.batchsize=4', '-l'], '-S '
     'CosmoFlow.batchsize: no variable batchsize in CosmoFlow (did you mean '
     'batch_size?)'),
    # The bad-input rerun: a misspelt test before the dot was ignored.
    ([*COSMOFLOW, '-S', 'CosmoFlw.batch_size=2', '-l'], '-S '
     'CosmoFlw.batch_size: no test CosmoFlw in the checks loaded (did you '
     'mean CosmoFlow?): fix the test name before the dot'),
    ([*COSMOFLOW, '-S', 'global_batch_size=64', '-l'], '-S global_batch_size: '
     'no variable global_batch_size in any selected test (a variable of the '
     'megatron checks, none selected)'),
    ([*COSMOFLOW, '-S', 'device=cuda', '-l'], '-S device: device is set by '
     'the suite itself (logged with every result), not a setting'),
    # Row 86: "check path ... does not exist", then Ran 0/0 and exit 0.
    (['-c', 'checks', '-n', 'CosmoFlow', '-l'], 'check path {cwd}/checks '
     "does not exist: fix -c (the suite's checks: {repo}/checks)"),
])
def test_suite_refuses_what_reframe_only_warns_of(run_reframe, tmp_path,
                                                  args, message):
    proc, var = suite(run_reframe, *args)
    assert proc.returncode == 1, proc.stdout[-2000:]
    said, = suite_error(proc)
    assert said.startswith('hpcml suite: ' + message.format(
        cwd=tmp_path, repo=REPO)), said
    assert not (var / 'stage').exists() or not list(
        (var / 'stage').rglob('rfm_job.sh'))


@pytest.mark.integration
def test_the_hint_for_a_parameter_selects_its_cases(run_reframe):
    """hpcml suite's advice for a parameter given to -S, and the docs',
    was -n 'MegatronGPT%model_size=13B': ReFrame matches -n against the
    whole display name (MegatronGPT%scale=...%launch_mode=...%model_size=
    13B), so it selected nothing. The advice's pattern, given to reframe
    -l, lists that value's cases of that test, and only those."""
    proc, _ = suite(run_reframe, *MEGATRON[:2], '-n', '^MegatronGPT%',
                    '-S', 'model_size=tiny', '-l')
    said, = suite_error(proc)
    pattern, = re.findall(r"select its value with -n '([^']+)'", said)
    proc, _ = run_reframe(BIN / 'reframe', '-C', REPO / 'config/local.py',
                          *MEGATRON[:2], '-n', pattern, '-l')
    assert proc.returncode == 0, proc.stderr[-2000:]
    listed = re.findall(r'^- (\S+) (.*) /\w+$', proc.stdout, re.M)
    assert len(listed) == 3, proc.stdout[-2000:]
    assert all(test == 'MegatronGPT' and case.endswith('%model_size=tiny')
               for test, case in listed), listed


def test_suite_says_a_config_files_syntax_error_in_one_line(run_reframe,
                                                           tmp_path):
    """Second round, row 50: a comma missing in a copy of config/local.py
    was ReFrame's 24-line traceback, through hpcml suite too."""
    config = local_config_with(tmp_path, "'max_jobs': 1,", "'max_jobs': 1")
    proc, _ = suite(run_reframe, '-C', config, *COSMOFLOW, '-l')
    assert proc.returncode == 1
    line = config_error(proc)
    assert line.startswith(f'{config}, line ')
    assert line.endswith(': invalid syntax. Perhaps you forgot a comma?: '
                         'fix the configuration file')


def broken_references(tmp_path):
    '''A copy of config/references whose cosmoflow.yaml does not parse.'''
    import shutil
    refs = tmp_path / 'refs'
    shutil.copytree(REPO / 'config/references', refs)
    (refs / 'cosmoflow.yaml').write_text('CosmoFlow:\n  $index: [unclosed\n')
    return refs


def test_suite_refuses_a_test_that_does_not_load(run_reframe, tmp_path):
    '''Row 76: a broken references file dropped CosmoFlow with warnings,
    the other workload ran, and the session exited 0.'''
    refs = broken_references(tmp_path)
    proc, _ = suite(run_reframe, '-c', REPO / 'checks/cosmoflow.py', '-c',
                    REPO / 'checks/alphafold2.py', '-n',
                    '^(CosmoFlow|AlphaFold2)%scale=1_proc%'
                    'launch_mode=per_task$', '--dry-run',
                    env={'HPCML_REFERENCES_DIR': str(refs)})
    assert proc.returncode == 1, proc.stdout[-2000:]
    said = suite_error(proc)
    assert said[0].startswith(
        'hpcml suite: test CosmoFlow did not load: parser error: while '
        f'parsing a flow sequence in "{refs}/cosmoflow.yaml", line 2')
    assert said[0].endswith(': fix it, or leave it out with -x CosmoFlow')
    assert 'Ran ' not in proc.stdout      # nothing ran


def test_suite_refuses_a_references_file_of_the_wrong_shape(run_reframe,
                                                            tmp_path):
    '''The bad-input rerun: "CosmoFlow: 3" stopped the test on a bare
    "argument of type 'int' is not iterable", naming no file.'''
    refs = broken_references(tmp_path)
    (refs / 'cosmoflow.yaml').write_text('CosmoFlow: 3\n')
    proc, _ = suite(run_reframe, *COSMOFLOW, '--dry-run',
                    env={'HPCML_REFERENCES_DIR': str(refs)})
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert suite_error(proc) == [
        f'hpcml suite: test CosmoFlow did not load: bad_input: '
        f'{refs}/cosmoflow.yaml: CosmoFlow: 3 is no mapping of $index and '
        f"partitions (its comment shows an entry, and config/references "
        f"holds the suite's own): fix it, or leave it out with -x CosmoFlow"]


@pytest.mark.parametrize('text, words', [
    ('- CosmoFlow\n', 'is a list, not a mapping of test names'),
    ('CosmoFlow: {$index: 3}\n', '$index 3 is no list of names'),
    ('CosmoFlow: {$index: [$partition, 4]}\n', 'is no list of names'),
])
def test_references_of_the_wrong_shape_are_named(tmp_path, text, words):
    from hpctestlib_ml.history_refs import lookup
    path = tmp_path / 'cosmoflow.yaml'
    path.write_text(text)
    assert words in lookup.shape_problem(path, 'CosmoFlow')
    for fine in ('', 'Other: 3\n', 'CosmoFlow: {$index: [$partition]}\n',
                 'CosmoFlow: [unclosed\n'):
        path.write_text(fine)
        assert lookup.shape_problem(path, 'CosmoFlow') is None


def test_suite_refuses_a_test_file_that_does_not_load(run_reframe,
                                                      tmp_path):
    checks = tmp_path / 'checks'
    checks.mkdir()
    (checks / 'broken.py').write_text(
        'import reframe as rfm\nimport hpcml_no_such_module\n')
    proc, _ = suite(run_reframe, '-c', checks, '-l')
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert suite_error(proc) == [
        "hpcml suite: test file checks/broken.py did not load: module not "
        "found error: No module named 'hpcml_no_such_module' "
        f"({checks}/broken.py:2): fix it, or leave it out of -c"]


@pytest.mark.parametrize('args', [
    [*COSMOFLOW, '-S', 'batch_size=4', '-l'],
    [*COSMOFLOW, '-S', 'MegatronGPT.global_batch_size=16', '-l'],
    [*MEGATRON, '-S', 'global_batch_size=8', '-S', 'time_limit=5m', '-l'],
    [*COSMOFLOW, '--mode', 'smoke', '-l'],
])
def test_suite_takes_what_sets_a_variable(run_reframe, args):
    proc, _ = suite(run_reframe, *args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert suite_error(proc) == []


def test_plain_reframe_keeps_its_warnings(run_reframe):
    proc, _ = run_reframe(BIN / 'reframe', '-C', REPO / 'config/local.py',
                          *COSMOFLOW, '-S', 'batchsize=4', '-l')
    assert proc.returncode == 0
    assert ("WARNING: test 'CosmoFlow': the following variables were not "
            "set: 'batchsize'") in ANSI.sub('', proc.stdout + proc.stderr)


def test_suite_help_is_not_a_failed_run(run_reframe):
    '''Row 24: reframe's help, then "no test case was selected" and exit
    2.'''
    proc, _ = suite(run_reframe, '--help')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('usage: hpcml suite [REFRAME OPTION...]')
    assert 'a -S name\nthat sets no variable' in proc.stdout or \
        'a -S name that sets no variable' in ' '.join(proc.stdout.split())
    assert '--performance-report' in proc.stdout and '--mode' in proc.stdout
    assert 'no test case was selected' not in proc.stderr


@pytest.mark.integration
def test_suite_fails_when_the_results_database_is_damaged(run_reframe,
                                                          tmp_path):
    '''Row 61: a corrupt results.db was a warning without its path or a
    fix, and the session exited 0. The perflog line is written, and the
    database left as it was.'''
    var = tmp_path / 'var'
    var.mkdir()
    garbage = bytes(range(256)) * 32
    (var / 'results.db').write_bytes(garbage)
    proc, _ = suite(run_reframe, *COSMOFLOW)
    assert proc.returncode == 1, proc.stdout[-2000:]
    db = var / 'results.db'
    assert suite_error(proc) == [
        f'hpcml suite: the results of this session could not be stored in '
        f'{db} (file is not a database); they are in the perflogs and the '
        f'run report; it is damaged: move it aside (mv {db} {db}.broken) '
        f'and the next session starts a new one']
    assert 'Ran 1/1 test case(s)' in proc.stdout
    perflog = var / 'perflogs' / 'local' / 'cpu' / 'CosmoFlow.log'
    assert len(perflog.read_text().splitlines()) == 2    # header, one run
    assert db.read_bytes() == garbage


# Results stay together: --prefix moves them all

def test_prefix_is_where_a_sessions_results_go(monkeypatch, tmp_path):
    from hpctestlib_ml import paths, sessions, siteconfig
    monkeypatch.setenv('PWD', str(tmp_path))
    monkeypatch.delenv('RFM_PREFIX', raising=False)
    assert sessions.prefix_asked(['-r', '--prefix', 'out']) == 'out'
    assert sessions.prefix_asked(['--prefix=/x', '-r']) == '/x'
    assert sessions.prefix_asked(['-r'], {'RFM_PREFIX': '/y'}) == '/y'
    assert sessions.prefix_asked(['-r'], {}) is None
    assert siteconfig.results_dir(True, ['--prefix', 'out'], {}) == \
        str(tmp_path / 'out')
    assert siteconfig.results_dir(True, ['-r'], {}) == paths.VAR_DIR
    # A tool that loads a configuration is no session of its own.
    assert siteconfig.results_dir(False, ['--prefix', 'out'], {}) == \
        paths.VAR_DIR


@pytest.mark.integration
@pytest.mark.parametrize('command', ['reframe', 'suite'])
def test_prefix_moves_perflogs_db_reports_and_log_together(
        run_reframe, tmp_path, command):
    '''Row 84: --prefix moved the perflogs only; results.db, the run
    reports and reframe.log stayed in the var directory, and hpcml report
    said "no perflogs" there.'''
    if command == 'reframe':
        out = tmp_path / 'out'
        proc, var = run_reframe(BIN / 'reframe', '-C', REPO /
                                'config/local.py', *COSMOFLOW, '-r',
                                '--prefix', out)
    else:
        # hpcml suite takes a --prefix relative to where it runs.
        out = tmp_path / 'nightly'
        proc, var = run_reframe(BIN / 'hpcml', 'suite', *COSMOFLOW,
                                '--prefix', 'nightly')
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert (out / 'perflogs' / 'local' / 'cpu' / 'CosmoFlow.log').is_file()
    assert (out / 'results.db').stat().st_size > 0
    assert (out / 'reframe.log').stat().st_size > 0
    assert list((out / 'reports').glob('*.json'))
    for name in ('perflogs', 'results.db', 'reframe.log', 'reports'):
        assert not (var / name).exists(), name
    report = run_reframe(BIN / 'hpcml', 'report', '--prefix', out)[0]
    assert report.returncode == 0, report.stderr
    assert '1 runs selected of 1 read' in report.stdout
    report = run_reframe(BIN / 'hpcml', 'report')[0]
    assert report.returncode == 2
    assert report.stderr.strip() == (
        f'hpcml report: error: no perflogs at {var}/perflogs: run the suite '
        f'first, or pass --prefix DIR (where reframe --prefix DIR wrote) or '
        f'--perflogs DIR')


@pytest.mark.parametrize('command', ['reframe', 'suite'])
def test_var_dir_under_a_file_stays_one_line(run_reframe, tmp_path,
                                             command):
    '''Row 82 (clear, stays clear): HPCML_VAR_DIR under a regular file.'''
    afile = tmp_path / 'afile'
    afile.write_text('')
    args = ([BIN / 'reframe', '-C', REPO / 'config/local.py'] if
            command == 'reframe' else [BIN / 'hpcml', 'suite'])
    proc, _ = run_reframe(*args, *COSMOFLOW, '-l',
                          env={'HPCML_VAR_DIR': str(afile / 'var')})
    assert proc.returncode == 1
    assert config_error(proc) == (
        f'cannot write in {afile}/var (Not a directory): make it writable, '
        f'or set HPCML_VAR_DIR (or give the session --prefix) to a '
        f'directory you may write')


# A missing input file: filesystem (or bad_input where the value is no
# path), at setup where ReFrame's machine sees the path, else at the job's
# start in the same words

def megatron_checkout(tmp_path):
    '''A directory as a Megatron-LM checkout is to the check: it holds
    pretrain_gpt.py.'''
    checkout = tmp_path / 'Megatron-LM'
    checkout.mkdir()
    (checkout / 'pretrain_gpt.py').write_text('')
    return checkout


@pytest.mark.integration
@pytest.mark.parametrize('check, options, category, message', [
    # Row 39: found only in the job, and as software.
    ('MegatronGPT', ['megatron_lm=/nonexistent/Megatron-LM'], 'filesystem',
     "-S megatron_lm /nonexistent/Megatron-LM: No such file or directory: "
     "'/nonexistent/Megatron-LM' (the directory the job reads): fix -S "
     "megatron_lm"),
    ('MegatronGPT', ['megatron_lm={tmp}'], 'filesystem',
     "No such file or directory: '{tmp}/pretrain_gpt.py'"),
    ('MegatronGPT', ['megatron_lm={checkout}',
                     'data_path=/nonexistent/oscar_text_document'],
     'filesystem', "-S data_path /nonexistent/oscar_text_document: No such "
     "file or directory: '/nonexistent/oscar_text_document.bin' (the "
     "indexed dataset (.bin and .idx) the job reads)"),
    # Row 38 (clear, stays clear).
    ('MegatronGPT', ['data_path=/nonexistent/oscar_text_document'],
     'bad_input', 'an indexed dataset needs Megatron-LM itself: set -S '
     'megatron_lm='),
    # Row 40: blamed on software, found in the job; the typo taken as a
    # path.
    ('CosmoFlow', ['data=/nonexistent/cosmoUniverse'], 'filesystem',
     "-S data /nonexistent/cosmoUniverse: No such file or directory: "
     "'/nonexistent/cosmoUniverse' (the directory the job reads): fix -S "
     "data"),
    ('CosmoFlow', ['data=synthetc'], 'bad_input', "-S data 'synthetc' is "
     "neither 'synthetic' nor an absolute path (the job runs in its stage "
     "directory) (did you mean synthetic?): fix -S data"),
    ('DeepLabV3Plus', ['data=deepcam/train'], 'bad_input', "-S data "
     "'deepcam/train' is neither 'synthetic' nor an absolute path"),
    ('BERTLarge', ['data=/nonexistent/wiki.txt', 'tokenizer={tmp}'],
     'filesystem', "-S data /nonexistent/wiki.txt: No such file or "
     "directory: '/nonexistent/wiki.txt' (the file the job reads)"),
])
def test_missing_input_fails_at_setup(run_reframe, tmp_path, check, options,
                                      category, message):
    checkout = megatron_checkout(tmp_path)
    fill = {'tmp': tmp_path / 'empty', 'checkout': checkout}
    (tmp_path / 'empty').mkdir()
    args = [a for o in options for a in ('-S', o.format(**fill))]
    proc = dry_run(run_reframe, check, *args)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert reason(proc).startswith(f'{category}: '), reason(proc)
    assert message.format(**fill) in reason(proc)
    assert 'Failing phase: setup' in proc.stdout
    assert 'Traceback' not in proc.stdout + proc.stderr


@pytest.mark.integration
def test_missing_site_data_fails_at_setup_naming_the_config(run_reframe,
                                                            tmp_path):
    config = local_config_with(
        tmp_path, "'scales': ['1_proc', '2_procs'],",
        "'scales': ['1_proc', '2_procs'], 'cosmoflow_data': "
        "'/nonexistent/cosmoUniverse',")
    path, pattern = ONE['CosmoFlow']
    proc, _ = run_reframe(BIN / 'reframe', '-C', config, '-c', REPO / path,
                          '-n', pattern, '--dry-run')
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert reason(proc) == (
        "filesystem: extras['cosmoflow_data'] /nonexistent/cosmoUniverse: "
        "No such file or directory: '/nonexistent/cosmoUniverse' (the "
        "directory the job reads): fix it in the site configuration, or put "
        "the data there")


def test_inputs_seen_from_here_are_checked_at_setup(tmp_path):
    from hpctestlib_ml import inputs
    present = tmp_path / 'data'
    present.mkdir()
    # Its parent is on a file system seen here (not node-local /tmp,
    # where a clone of the repository may lie).
    on_shared = '/usr/no-such-data'
    assert inputs.visible_here(on_shared, local=False)
    assert not inputs.visible_here('/nonexistent/data', local=False)
    assert inputs.visible_here('/nonexistent/data', local=True)
    assert not inputs.visible_here('/tmp/node-local-copy', local=False)
    assert not inputs.visible_here('$SCRATCH/data', local=True)
    item = inputs.Input('-S data', on_shared, 'dir', words=('synthetic',))
    category, why = inputs.problem(item, local=False)
    assert category == 'filesystem' and why.startswith(
        f"-S data {on_shared}: No such file or directory: '{on_shared}'")
    # Not visible from here: the job's start says it.
    assert inputs.problem(inputs.Input('-S data', '/nonexistent/x', 'dir'),
                          local=False) is None
    assert inputs.problem(inputs.Input('-S data', str(present), 'dir'),
                          local=True) is None


@pytest.mark.parametrize('program, args, missing', [
    ('cosmoflow', ['--data', '/nonexistent/cosmoUniverse'],
     '/nonexistent/cosmoUniverse'),
    ('deepcam', ['--data', '/nonexistent/deepcam'], '/nonexistent/deepcam'),
    ('bert_pretrain', ['--data', '/nonexistent/wiki.txt'],
     '/nonexistent/wiki.txt'),
    ('gpt_pretrain', ['--megatron-lm', '/nonexistent/Megatron-LM'],
     '/nonexistent/Megatron-LM'),
    ('gpt_pretrain', ['--data-path', '/nonexistent/oscar'],
     '/nonexistent/oscar.bin'),
])
def test_missing_input_at_the_jobs_start_is_filesystem_too(program, args,
                                                           missing):
    '''Where ReFrame's machine cannot see the path (a compute node's
    file system), the program says it at its start, in the words triage
    files under filesystem, as the check's setup would.'''
    import os
    import subprocess
    import sys
    from hpctestlib_ml import triage
    proc = subprocess.run(
        [sys.executable, '-m', program, *args], capture_output=True,
        text=True, env={**os.environ, 'PYTHONPATH': str(REPO / 'src'),
                        'HPCML_DEVICE_KIND': 'cpu'}, timeout=300)
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert f"No such file or directory: '{missing}'" in line, proc.stderr
    assert triage.triage(proc.stderr).category == 'filesystem'


def test_read_only_var_dir_stays_one_line(tmp_path):
    '''Row 81 (clear, stays clear): the var directory on a read-only bind
    mount (root ignores permissions, so a mount namespace makes it).'''
    import os
    import shutil
    import subprocess
    var = tmp_path / 'var'
    var.mkdir()
    if os.geteuid() != 0 or not shutil.which('unshare') or subprocess.run(
            ['unshare', '-m', 'true'], capture_output=True).returncode:
        pytest.skip('needs root and unshare -m for a read-only mount')
    import shlex
    script = (f'mount --bind {var} {var} && '
              f'mount -o remount,ro,bind {var} && exec ' +
              shlex.join(map(str, [BIN / 'hpcml', 'suite', *COSMOFLOW,
                                   '-l'])))
    proc = subprocess.run(['unshare', '-m', 'sh', '-c', script],
                          env={**os.environ, 'HPCML_VAR_DIR': str(var),
                               'HPCML_CACHE_DIR': ''},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert config_error(proc) == (
        f'cannot take the session lock {var}/.session.lock (Read-only file '
        f'system): make it writable, or set HPCML_VAR_DIR (or give the '
        f'session --prefix) to a directory you may write')


def test_a_dotted_setting_of_a_suite_test_not_loaded_is_no_mistake():
    '''A nightly script's -S for every workload, with -c naming one: the
    other tests' names are the suite's, not typos.'''
    from hpctestlib_ml.strict_reframe import variable_problems
    selected = [object()]
    assert variable_problems({'MegatronGPT.global_batch_size': '8'},
                             selected) == []
    assert variable_problems({'MegatronGPTContainer.x': '8'}, selected) == []
    problem, = variable_problems({'MegatronGTP.x': '8'}, selected)
    assert 'no test MegatronGTP' in problem
