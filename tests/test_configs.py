"""Every site config loads and validates against ReFrame's schema, and
says what the checks need (in config, not in the checks)."""
import json
import os
import subprocess
import sys

import pytest
from reframe.core import config as rfm_config
from reframe.core.exceptions import ConfigError

from hpctestlib_ml import siteconfig, tensorflow_build
from hpctestlib_ml.paths import REPO_ROOT
from hpctestlib_ml.constants import DEVICE_PEAK_FLOPS, SCALES

CONFIGS = ['config/local.py', 'config/slurm.py',
           'config/systems/juwels_booster.py']


def forget_config_modules():
    '''Config files, siteconfig and paths read the environment at import,
    and ReFrame imports a config file once per process: make the next load
    import them afresh.'''
    config_dir = str(REPO_ROOT / 'config')
    for name, module in list(sys.modules.items()):
        path = getattr(module, '__file__', None) or ''
        if (name in ('hpctestlib_ml.siteconfig', 'hpctestlib_ml.paths') or
                path.startswith(config_dir)):
            del sys.modules[name]


@pytest.fixture(autouse=True)
def isolated_var(tmp_path, monkeypatch, cache_dir):
    '''Each test's own var directory; after it, the modules as they were
    before (a paths module imported under this test's HPCML_VAR_DIR left
    in sys.modules gave later test files its VAR_DIR).'''
    saved = {name: sys.modules[name] for name in
             ('hpctestlib_ml.siteconfig', 'hpctestlib_ml.paths')
             if name in sys.modules}
    monkeypatch.setenv('HPCML_VAR_DIR', str(tmp_path / 'var'))
    monkeypatch.setenv('HPCML_CACHE_DIR', str(cache_dir))
    forget_config_modules()
    yield
    forget_config_modules()
    sys.modules.update(saved)
    # An import binds the module on its package too: ``from hpctestlib_ml
    # import paths`` read this test's paths module after it ended.
    import hpctestlib_ml
    for name in ('siteconfig', 'paths'):
        module = saved.get(f'hpctestlib_ml.{name}')
        if module is not None:
            setattr(hpctestlib_ml, name, module)
        elif hasattr(hpctestlib_ml, name):
            delattr(hpctestlib_ml, name)


def load(path, system):
    site = rfm_config.load_config(str(REPO_ROOT / path))
    site.validate()
    site.select_subconfig(system)
    return site


@pytest.mark.parametrize('rate, expected', [(None, 0.1), ('1', 1.0)])
def test_a_batch_scheduler_is_polled_as_the_site_says(monkeypatch, rate,
                                                      expected):
    '''ReFrame's polling decays to one poll every 10 s, so a job that ended
    was seen up to 10 s late; HPCML_BATCH_POLL_RATE_MIN (the project's
    Slurm cluster sets 1) keeps it faster. Unset, ReFrame's default.'''
    if rate is None:
        monkeypatch.delenv('HPCML_BATCH_POLL_RATE_MIN', raising=False)
    else:
        monkeypatch.setenv('HPCML_BATCH_POLL_RATE_MIN', rate)
    site = load('config/slurm.py', 'slurm')
    assert site.get('general/0/poll_rate_min') == expected


@pytest.mark.parametrize('path, system', [
    ('config/local.py', 'local'), ('config/slurm.py', 'slurm'),
    ('config/systems/juwels_booster.py', 'juwels-booster'),
])
def test_config_validates_and_writes_under_var(path, system, tmp_path):
    site = load(path, system)
    var = str(tmp_path / 'var')
    assert site.get('systems/0/prefix') == var
    # Stage, output and perflogs under the prefix, so that --prefix moves
    # them (tests/test_reframe_local.py runs it).
    assert not site.get('systems/0/stagedir')
    assert not site.get('systems/0/outputdir')
    assert site.get('storage/0/enable') is True
    assert site.get('storage/0/sqlite_db_file').startswith(var)
    assert site.get('logging/0/handlers_perflog/0/basedir') == 'perflogs'
    assert site.get('logging/0/handlers_perflog/0/locking_enable') is True
    modes = {m['name'] for m in site.get('modes')}
    assert {'smoke', 'benchmark'} <= modes
    for part in site.get('systems/0/partitions'):
        for scale in part['extras'].get('scales', []):
            assert scale in SCALES


def test_local_cpu_partition():
    site = load('config/local.py', 'local')
    cpu = site.get('systems/0/partitions')[0]
    assert cpu['name'] == 'cpu' and cpu['scheduler'] == 'local'
    assert cpu['processor']['num_cpus'] == os.cpu_count()
    assert cpu['extras']['scales'] == ['1_proc', '2_procs']
    assert cpu['extras']['cpu_peak_flops'] > 1e9
    env, = [e for e in site.get('environments') if e['name'] == 'python']
    assert env['features'] == ['torch', 'tensorflow']
    assert any(os.path.dirname(sys.executable) in v for _, v in
               env['env_vars'])


def test_juwels_booster_site_facts(monkeypatch):
    monkeypatch.setenv('HPCML_ACCOUNT', 'jscbenchmark')
    site = load('config/systems/juwels_booster.py', 'juwels-booster')
    booster, = site.get('systems/0/partitions')
    assert booster['access'] == ['--partition=booster',
                                 '--account=jscbenchmark']
    gpu, = booster['devices']
    assert (gpu['model'], gpu['num_devices']) == ('A100', 4)
    assert gpu['model'] in DEVICE_PEAK_FLOPS
    assert booster['resources'][0]['options'] == [
        '--gres=gpu:{num_gpus_per_node}']
    assert booster['extras']['rendezvous_address'] == '{hostname}i'
    assert booster['extras']['scales'] == ['1_node', '2_nodes', '4_nodes',
                                           '8_nodes', '16_nodes']
    assert 'gpu' in booster['features']


def test_generic_slurm_from_env(monkeypatch):
    monkeypatch.setenv('HPCML_SLURM_PARTITION', 'gpus')
    monkeypatch.setenv('HPCML_GPUS_PER_NODE', '8')
    monkeypatch.setenv('HPCML_GPU_MODEL', 'H100-SXM')
    monkeypatch.setenv('HPCML_SCHEDULER', 'squeue')
    monkeypatch.setenv('HPCML_SCALES', '1_node,2_nodes')
    monkeypatch.setenv('HPCML_CPUS_PER_NODE', '64')
    site = load('config/slurm.py', 'slurm')
    part, = site.get('systems/0/partitions')
    assert part['name'] == 'gpus' and part['scheduler'] == 'squeue'
    assert part['processor']['num_cpus'] == 64
    assert part['access'] == ['--partition=gpus']
    assert part['devices'] == [{'type': 'gpu', 'num_devices': 8,
                                'model': 'H100-SXM'}]
    assert part['extras']['scales'] == ['1_node', '2_nodes']
    assert part['features'] == ['gpu']


# sinfo --noheader --format='%P %c' as sinfo(1) documents it: one line per
# partition and node group, the default partition marked '*', nodes that
# differ shown by their least count and '+'.
SINFO = """\
cpu* 128
gpus 72
gpus 64+
debug 16
"""


@pytest.mark.parametrize('partition, cpus', [
    (None, 128), ('cpu', 128), ('gpus', 64), ('debug', 16), ('nope', None),
])
def test_cpus_per_node_from_sinfo(partition, cpus):
    assert siteconfig.sinfo_cpus(SINFO, partition) == cpus
    assert siteconfig.sinfo_cpus('', partition) is None


def fake_sinfo(stdout='', stderr='', returncode=0, missing=False):
    def run(argv, **kwargs):
        assert argv == siteconfig.SINFO_CPUS
        if missing:
            raise FileNotFoundError(argv[0])
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)
    return run


def test_slurm_cpus_per_node_says_why_not():
    query = siteconfig.slurm_cpus_per_node
    assert query('gpus', fake_sinfo(SINFO)) == (64, None)
    assert query(None, fake_sinfo(SINFO)) == (128, None)
    assert query('a100', fake_sinfo(SINFO)) == (
        None, 'sinfo lists no partition a100')
    assert query('gpus', fake_sinfo(missing=True)) == (
        None, 'sinfo is not on PATH')
    assert query('gpus', fake_sinfo(
        stderr='sinfo: error: fetch_config: DNS SRV lookup failed\n'
               'sinfo: fatal: Could not establish a configuration source\n',
        returncode=1)) == (None, 'sinfo failed: sinfo: fatal: Could not '
                                 'establish a configuration source')


def test_gpu_partition_without_a_cpu_count_refuses_to_load():
    unknown = lambda partition: (None, 'sinfo is not on PATH')
    with pytest.raises(ConfigError) as err:
        siteconfig.cpus_per_node(None, 4, 'gpus', unknown)
    assert str(err.value) == (
        'CPUs per node of the GPU partition gpus unknown (sinfo is not on '
        'PATH): set HPCML_CPUS_PER_NODE to the CPUs Slurm gives one node, '
        'or its ranks share one CPU')
    # A CPU partition keeps srun's default; a configured count wins.
    assert siteconfig.cpus_per_node(None, 0, 'cpu', unknown) is None
    assert siteconfig.cpus_per_node(48, 4, 'gpus', unknown) == 48
    assert siteconfig.cpus_per_node(None, 4, 'gpus',
                                    lambda partition: (72, None)) == 72


def sinfo_on_path(monkeypatch, tmp_path, script):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'sinfo').write_text('#!/bin/sh\n' + script)
    (bin_dir / 'sinfo').chmod(0o755)
    monkeypatch.setenv('PATH', f'{bin_dir}:{os.environ["PATH"]}')


def test_generic_slurm_asks_slurm_for_the_cpus(monkeypatch, tmp_path):
    sinfo_on_path(monkeypatch, tmp_path, f"cat <<'EOF'\n{SINFO}EOF\n")
    monkeypatch.setenv('HPCML_SLURM_PARTITION', 'gpus')
    monkeypatch.setenv('HPCML_GPUS_PER_NODE', '4')
    monkeypatch.setenv('HPCML_DEVICE_MEMORY_GIB', '80')
    monkeypatch.delenv('HPCML_CPUS_PER_NODE', raising=False)
    part, = load('config/slurm.py', 'slurm').get('systems/0/partitions')
    assert part['processor']['num_cpus'] == 64


def test_generic_slurm_gpus_without_cpus_fail_naming_the_variable(
        monkeypatch, tmp_path):
    sinfo_on_path(monkeypatch, tmp_path,
                  'echo "sinfo: error: Unable to contact slurm controller '
                  '(connect failure)" >&2; exit 1\n')
    monkeypatch.setenv('HPCML_GPUS_PER_NODE', '4')
    monkeypatch.delenv('HPCML_CPUS_PER_NODE', raising=False)
    monkeypatch.delenv('HPCML_SLURM_PARTITION', raising=False)
    with pytest.raises(ValueError, match=r'^CPUs per node of the GPU '
                       r'partition \(default\) unknown \(sinfo failed: sinfo: '
                       r'error: Unable to contact slurm controller \(connect '
                       r'failure\)\): set HPCML_CPUS_PER_NODE '):
        load('config/slurm.py', 'slurm')


@pytest.mark.parametrize('name', ['HPCML_CONTAINER_MODULES',
                                  'HPCML_APPTAINER_MODULES'])
def test_container_runtime_modules_are_loaded_in_the_job(monkeypatch, name):
    '''The modules that provide the container runtime went to the
    platform's ReFrame 'modules', which config/slurm.py's 'nomod' modules
    system drops with a warning ("module 'apptainer' will not be loaded"):
    every container job then found no runtime. They are the container
    environment's prepare_cmds now, as HPCML_MODULES are the python
    environment's.'''
    monkeypatch.setenv('HPCML_CPUS_PER_NODE', '4')
    monkeypatch.setenv(name, 'apptainer/1.3.4 squashfs-tools')
    site = load('config/slurm.py', 'slurm')
    container, = [e for e in site.get('environments')
                  if e['name'] == 'container']
    assert container['prepare_cmds'] == [
        'module load apptainer/1.3.4 squashfs-tools']
    part, = site.get('systems/0/partitions')
    assert part['container_platforms'][0]['modules'] == []


def test_generic_slurm_exports_hpcml_env(monkeypatch):
    monkeypatch.setenv('HPCML_ENV', "NCCL_SOCKET_IFNAME=ib0 "
                       "GLOO_SOCKET_IFNAME=ib0 NCCL_IB_HCA='mlx5_0 mlx5_1'")
    part, = load('config/slurm.py', 'slurm').get('systems/0/partitions')
    assert part['env_vars'] == [['NCCL_SOCKET_IFNAME', 'ib0'],
                                ['GLOO_SOCKET_IFNAME', 'ib0'],
                                ['NCCL_IB_HCA', 'mlx5_0 mlx5_1']]
    monkeypatch.delenv('HPCML_ENV')
    forget_config_modules()
    part, = load('config/slurm.py', 'slurm').get('systems/0/partitions')
    assert part['env_vars'] == []


@pytest.mark.parametrize('value, message', [
    ('NCCL_SOCKET_IFNAME', "got 'NCCL_SOCKET_IFNAME' ('NCCL_SOCKET_IFNAME' "
                           "is not NAME=value)"),
    ('1X=2', "got '1X=2' ('1X=2' is not NAME=value)"),
    ("A='unclosed", 'not shell words (No closing quotation)'),
])
def test_generic_slurm_bad_hpcml_env_names_the_variable(monkeypatch, value,
                                                        message):
    monkeypatch.setenv('HPCML_ENV', value)
    with pytest.raises(ConfigError,
                       match=r'^HPCML_ENV must be shell words NAME=value, '):
        load('config/slurm.py', 'slurm')
    with pytest.raises(ConfigError) as err:
        siteconfig.env('HPCML_ENV')
    assert message in str(err.value)
    assert str(err.value).endswith(': fix the environment variable '
                                   'HPCML_ENV (read by config/slurm.py)')


def test_generic_slurm_bad_env_names_the_variable(monkeypatch):
    monkeypatch.setenv('HPCML_GPUS_PER_NODE', 'four')
    with pytest.raises(ConfigError,
                       match='HPCML_GPUS_PER_NODE must be an integer >= 0'):
        load('config/slurm.py', 'slurm')


def test_references_file_is_valid_reframe_yaml():
    import yaml
    refs = yaml.safe_load((REPO_ROOT / 'config' / 'references' /
                           'clip.yaml').read_text())
    mmoclip = refs['MMoCLIP']
    assert mmoclip['$index'] == ['$partition', 'reference_case']
    assert mmoclip['juwels-booster:booster']['benchmark 8x.*'][
        'total_time_secs'] == [1260, None, 0.0, 's']


def test_jubench_reference_holds_for_its_own_batch_only():
    '''jubench's 175B figure was measured at micro batch 1 and global
    batch 96; the check's default batch is another run.'''
    import re
    import yaml
    refs = yaml.safe_load((REPO_ROOT / 'config' / 'references' /
                           'megatron.yaml').read_text())['MegatronGPT']
    assert refs['$index'] == ['$partition', 'reference_case']
    booster = refs['juwels-booster:booster']
    (key, entry), = booster.items()
    assert entry['tokens_per_second'][0] == 36055.39
    jubench = ('benchmark 96x4 srun batch=1 bf16 model_size=175B '
               'global_batch_size=96 tp=4 pp=8 program=megatron-lm')
    default = jubench.replace('global_batch_size=96', 'global_batch_size=768')
    fallback = jubench.replace('megatron-lm', 'megatron-core')
    assert re.fullmatch(key, jubench)
    assert not re.fullmatch(key, default) and not re.fullmatch(key, fallback)


def fake_nvidia_smi(tmp_path, monkeypatch, names, select=True):
    '''Put an nvidia-smi that lists *names* first on PATH; with ``-i
    IDS`` (where *select*; else it fails, as for ids it does not know), one
    of them per id, as nvidia-smi lists the GPUs it is given.
    CUDA_VISIBLE_DEVICES unset, as on a box where nobody set it.'''
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    script = bin_dir / 'nvidia-smi'
    listing = ''.join(f'echo "{n}"\n' for n in names)
    first = names[0] if names else ''
    script.write_text(
        '#!/bin/sh\n'
        'for arg; do\n'
        '  if [ "$prev" = -i ]; then\n' +
        ('    echo "$arg" | tr , "\\n" | while read -r _; do '
         f'echo "{first}"; done; exit 0\n' if select else
         '    echo "No devices were found" >&2; exit 6\n') +
        '  fi\n'
        '  prev="$arg"\n'
        'done\n' + listing)
    script.chmod(0o755)
    monkeypatch.setenv('PATH', f'{bin_dir}:{os.environ["PATH"]}')
    monkeypatch.delenv('CUDA_VISIBLE_DEVICES', raising=False)


def test_local_gpu_partition_appears_with_gpus(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, ['NVIDIA H100 80GB HBM3'] * 4)
    site = load('config/local.py', 'local')
    cpu, gpu = site.get('systems/0/partitions')
    assert gpu['name'] == 'gpu' and 'gpu' in gpu['features']
    assert gpu['devices'] == [{'type': 'gpu', 'num_devices': 4,
                               'model': 'H100-SXM'}]
    assert gpu['devices'][0]['model'] in DEVICE_PEAK_FLOPS


@pytest.mark.parametrize('visible, select, expected', [
    ('0', True, 1), ('2,3', True, 2),
    ('GPU-8f6c1b7e-0c4e-4f4c-9b8e-1d2a3b4c5d6e', True, 1),
    ('1,-1,2', True, 1),                 # CUDA reads up to the -1
    ('0,1', False, 2),                   # nvidia-smi -i fails: 2 of its 4
    ('', True, 0), ('-1', True, 0),      # every GPU hidden
])
def test_local_gpu_partition_counts_only_the_visible_gpus(
        tmp_path, monkeypatch, visible, select, expected):
    # The jobs inherit CUDA_VISIBLE_DEVICES: with 0 exported on a 4-GPU
    # box they see one GPU, so the partition must say 1, or the 4-rank
    # cases would put 4 ranks on it.
    fake_nvidia_smi(tmp_path, monkeypatch, ['NVIDIA H100 80GB HBM3'] * 4,
                    select=select)
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', visible)
    partitions = load('config/local.py', 'local').get(
        'systems/0/partitions')
    gpus = [p['devices'][0]['num_devices'] for p in partitions
            if p['name'] == 'gpu']
    assert gpus == ([expected] if expected else [])


#: build_info.py as TensorFlow's build writes it (a CUDA wheel's; the
#: CPU one is the installed tensorflow-cpu's).
CUDA_BUILD_INFO = '''"""Auto-generated module providing information about the build."""
import collections

build_info = collections.OrderedDict([('cpu_compiler', '/usr/lib/llvm-18/bin/clang'), ('cuda_compute_capabilities', ['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']), ('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True), ('is_rocm_build', False), ('is_tensorrt_build', False)])
'''
CPU_BUILD_INFO = '''import collections

build_info = collections.OrderedDict([('is_cuda_build', False), ('is_rocm_build', False), ('is_tensorrt_build', False)])
'''


def fake_tensorflow(directory, build_info):
    '''A TensorFlow package under *directory* whose build_info.py is
    *build_info*; returns *directory*.'''
    platform_dir = directory / 'tensorflow' / 'python' / 'platform'
    platform_dir.mkdir(parents=True)
    (directory / 'tensorflow' / '__init__.py').write_text('')
    (platform_dir / 'build_info.py').write_text(build_info)
    return directory


def test_tensorflow_gpu_backend_from_its_build_info():
    assert tensorflow_build.gpu_backend(CUDA_BUILD_INFO) == 'cuda'
    assert tensorflow_build.gpu_backend(CPU_BUILD_INFO) is None
    assert tensorflow_build.gpu_backend(CPU_BUILD_INFO.replace(
        "('is_rocm_build', False)", "('is_rocm_build', True)")) == 'rocm'
    assert tensorflow_build.gpu_backend('build_info = (') is None
    assert tensorflow_build.gpu_backend(None) is None


def test_which_tensorflow_drives_which_gpus(tmp_path):
    cuda = [str(fake_tensorflow(tmp_path / 'cuda', CUDA_BUILD_INFO))]
    cpu = [str(fake_tensorflow(tmp_path / 'cpu', CPU_BUILD_INFO))]
    assert tensorflow_build.drives('nvidia', cuda)
    assert not tensorflow_build.drives('amd', cuda)
    assert not tensorflow_build.drives('nvidia', cpu)
    assert not tensorflow_build.drives(None, cuda)
    assert not tensorflow_build.drives('nvidia', [str(tmp_path / 'none')])


def test_local_gpu_partition_offers_tensorflow_only_with_a_gpu_build(
        tmp_path, monkeypatch):
    '''ResNet50TF (valid_prog_environs +tensorflow) runs on local:gpu only
    where the installed TensorFlow computes on its GPUs: .venv's
    tensorflow-cpu would train the benchmark size on the CPU.'''
    fake_nvidia_smi(tmp_path, monkeypatch, ['NVIDIA H100 80GB HBM3'] * 4)

    def features(partition):
        forget_config_modules()
        site = load('config/local.py', f'local:{partition}')
        env, = [e for e in site.get('environments')
                if e['name'] == 'python']
        return env['features']

    assert features('cpu') == ['torch', 'tensorflow']
    if tensorflow_build.installed_build_info() is not None:
        assert tensorflow_build.gpu_backend(
            tensorflow_build.installed_build_info()) is None  # tensorflow-cpu
        assert features('gpu') == ['torch']
    monkeypatch.syspath_prepend(str(fake_tensorflow(tmp_path / 'site',
                                                    CUDA_BUILD_INFO)))
    assert features('gpu') == ['torch', 'tensorflow']


AMD_SMI_STATIC_ASIC = '''GPU: 0
    ASIC:
        MARKET_NAME: AMD Instinct MI300X
        VENDOR_ID: 0x1002
        DEVICE_ID: 0x74a1

GPU: 1
    ASIC:
        MARKET_NAME: AMD Instinct MI300X
        VENDOR_ID: 0x1002
        DEVICE_ID: 0x74a1
'''

#: rocm-smi --showproductname as ROCm prints it (one MI250X card: two
#: compute dies, two devices).
ROCM_SMI_PRODUCTS = '''
============================ ROCm System Management Interface ============================
====================================== Product Info ======================================
GPU[0]          : Card Series:          AMD Instinct MI250X
GPU[0]          : Card Model:           0x740c
GPU[1]          : Card Series:          AMD Instinct MI250X
GPU[1]          : Card Model:           0x740c
==========================================================================================
'''


@pytest.mark.parametrize('tool, output, count, model', [
    ('amd-smi', AMD_SMI_STATIC_ASIC, 2, 'MI300X'),
    ('rocm-smi', ROCM_SMI_PRODUCTS, 2, 'MI250X-GCD'),
])
def test_local_gpu_partition_appears_with_amd_gpus(tmp_path, monkeypatch,
                                                   tool, output, count,
                                                   model):
    fake_nvidia_smi(tmp_path, monkeypatch, [])     # no NVIDIA GPU
    script = tmp_path / 'bin' / tool
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\n")
    script.chmod(0o755)
    site = load('config/local.py', 'local')
    cpu, gpu = site.get('systems/0/partitions')
    assert gpu['devices'] == [{'type': 'gpu', 'num_devices': count,
                               'model': model}]
    assert gpu['extras']['gpu_vendor'] == 'amd'
    assert model in DEVICE_PEAK_FLOPS


def test_no_gpu_partition_without_gpus(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, [])
    site = load('config/local.py', 'local')
    assert [p['name'] for p in site.get('systems/0/partitions')] == ['cpu']


def test_relative_var_dirs_are_taken_from_where_the_user_runs(tmp_path,
                                                             monkeypatch):
    '''ReFrame imports config files from inside config/; a relative
    HPCML_VAR_DIR must still mean the user's working directory.'''
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('PWD', str(tmp_path))
    monkeypatch.setenv('HPCML_VAR_DIR', 'myvar')
    monkeypatch.setenv('HPCML_CACHE_DIR', 'mycache')
    site = load('config/systems/juwels_booster.py', 'juwels-booster')
    assert site.get('systems/0/prefix') == str(tmp_path / 'myvar')
    assert (tmp_path / 'myvar').is_dir()
    assert not (REPO_ROOT / 'config' / 'myvar').exists()
    from hpctestlib_ml import paths
    assert paths.CACHE_DIR == str(tmp_path / 'mycache')


@pytest.mark.parametrize('path', CONFIGS)
def test_results_db_on_and_httpjson_only_when_asked(path, monkeypatch):
    system = {'config/local.py': 'local', 'config/slurm.py': 'slurm',
              'config/systems/juwels_booster.py': 'juwels-booster'}[path]
    monkeypatch.setenv('HPCML_ACCOUNT', 'x')
    site = load(path, system)
    assert site.get('storage/0/enable') is True
    handlers = site.get('logging/0/handlers_perflog')
    assert [h['type'] for h in handlers] == ['filelog']
    fields = handlers[0]['format']
    for name in ('check_suite_version', 'check_framework_versions',
                 'check_cuda_version', 'check_gpu_driver',
                 'check_nccl_version', 'check_container_image',
                 'check_env_switches', 'check_energy_counter',
                 'check_job_nodelist'):
        assert f'%({name})s' in fields

    forget_config_modules()
    monkeypatch.setenv('HPCML_HTTPJSON_URL', 'http://elastic:9200/hpcml/_doc')
    site = load(path, system)
    http, = [h for h in site.get('logging/0/handlers_perflog')
             if h['type'] == 'httpjson']
    assert http['url'] == 'http://elastic:9200/hpcml/_doc'
    assert http['extras']['facility'] == 'hpcml'


@pytest.mark.parametrize('value', ['elastic:9200/hpcml/_doc', 'http://',
                                   'https://elastic 9200'])
def test_a_bad_httpjson_url_stops_the_configuration_in_one_line(
        monkeypatch, value):
    '''Before, any text was taken: ReFrame's httpjson handler then failed
    at each record, one warning a record, and posted nothing.'''
    from hpctestlib_ml import siteconfig
    monkeypatch.setenv('HPCML_HTTPJSON_URL', value)
    with pytest.raises(siteconfig.SiteConfigError) as err:
        siteconfig.httpjson_handlers()
    assert str(err.value) == (
        f"HPCML_HTTPJSON_URL must be an http(s) URL, http://host:9200/index/"
        f"_doc, got {value!r}: fix the environment variable "
        f"HPCML_HTTPJSON_URL (read by hpctestlib_ml/siteconfig.py, for "
        f"every configuration)")


@pytest.mark.parametrize('path', CONFIGS)
def test_reframe_log_at_info_unless_asked(path, monkeypatch):
    '''Debug records cost ReFrame a stack walk each, several per job poll
    (siteconfig.LOG_LEVEL): info by default, debug on request.'''
    system = {'config/local.py': 'local', 'config/slurm.py': 'slurm',
              'config/systems/juwels_booster.py': 'juwels-booster'}[path]
    monkeypatch.setenv('HPCML_ACCOUNT', 'x')

    def levels():
        site = load(path, system)
        file_log, = [h for h in site.get('logging/0/handlers')
                     if h['type'] == 'file']
        return site.get('logging/0/level'), file_log['level']

    assert levels() == ('info', 'info')
    forget_config_modules()
    monkeypatch.setenv('HPCML_LOG_LEVEL', 'debug')
    assert levels() == ('debug', 'debug')


def test_cpu_peak_is_measured_in_a_child_and_cached(tmp_path):
    '''The site config asks for the CPU peak inside ReFrame's process:
    measuring it there would import PyTorch into ReFrame.'''
    code = ('import sys; from hpctestlib_ml import cpu_peak; '
            'print(cpu_peak.cached_peak(sys.argv[1], 1), '
            "'torch' in sys.modules)")
    run = lambda: subprocess.run([sys.executable, '-c', code, str(tmp_path)],
                                 capture_output=True, text=True, check=True)
    flops, torch_imported = run().stdout.split()
    assert float(flops) > 1e9 and torch_imported == 'False'
    cached = json.loads((tmp_path / 'cpu_peak.json').read_text())
    (key, entry), = cached.items()
    assert key.endswith('|1') and entry['fp32_matmul_flops'] > 1e9
    # Read from the cache now: the same figure, no second measurement.
    entry['fp32_matmul_flops'] = 1.5e9
    (tmp_path / 'cpu_peak.json').write_text(json.dumps(cached))
    assert run().stdout.split() == ['1500000000.0', 'False']


@pytest.mark.parametrize('path, system', [('config/local.py', 'local'),
                                          ('config/slurm.py', 'slurm')])
def test_storage_dir_from_the_environment(monkeypatch, path, system):
    '''HPCML_STORAGE_DIR is the Storage component's directory
    (extras['storage_dir']); without it the stage directory is measured.'''
    monkeypatch.setenv('HPCML_CPUS_PER_NODE', '4')
    site = load(path, system)
    assert all('storage_dir' not in p['extras']
               for p in site.get('systems/0/partitions'))
    forget_config_modules()
    monkeypatch.setenv('HPCML_STORAGE_DIR', '$SCRATCH/hpcml')
    site = load(path, system)
    assert all(p['extras']['storage_dir'] == '$SCRATCH/hpcml'
               for p in site.get('systems/0/partitions'))


def test_noise_floor_of_references(monkeypatch):
    '''config/local.py declares its cpu partition's noise (30 %, this
    VM's); HPCML_REFERENCE_NOISE_PCT replaces it, and gives config/slurm.py
    one (extras['reference_noise_pct']).'''
    monkeypatch.setenv('HPCML_CPUS_PER_NODE', '4')
    monkeypatch.delenv('HPCML_REFERENCE_NOISE_PCT', raising=False)
    cpu = load('config/local.py', 'local').get('systems/0/partitions')[0]
    assert cpu['extras']['reference_noise_pct'] == 50
    slurm, = load('config/slurm.py', 'slurm').get('systems/0/partitions')
    assert 'reference_noise_pct' not in slurm['extras']
    monkeypatch.setenv('HPCML_REFERENCE_NOISE_PCT', '8')
    for path, system in (('config/local.py', 'local'),
                         ('config/slurm.py', 'slurm')):
        forget_config_modules()
        site = load(path, system)
        assert all(p['extras']['reference_noise_pct'] == 8
                   for p in site.get('systems/0/partitions'))


def test_juwels_storage_is_its_gpfs_scratch(monkeypatch):
    site = load('config/systems/juwels_booster.py', 'juwels-booster')
    booster, = site.get('systems/0/partitions')
    assert booster['extras']['storage_dir'] == '$SCRATCH'


@pytest.mark.parametrize('path', ['config/local.py', 'config/slurm.py',
                                  'config/systems/juwels_booster.py'])
def test_a_config_leaves_sys_path_as_it_found_it(path):
    '''ReFrame loads a configuration inside its temp_sys_path, which puts
    sys.path back by index: a config that put src/ first made it take
    the venv's site-packages off instead, and every `hpcml suite` ended
    with "failed to generate performance report: No module named
    'polars'". In a fresh interpreter, as ReFrame loads it.'''
    code = ('import sys; from reframe.core import config\n'
            'before = list(sys.path)\n'
            f'config.load_config({str(REPO_ROOT / path)!r})\n'
            'import polars\n'
            'print(sys.path == before)')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, env={**os.environ,
                                          'HPCML_CPUS_PER_NODE': '4',
                                          'HPCML_ACCOUNT': 'x'})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == 'True'


#: Settings that each pass alone and contradict each other or do nothing
#: (the second bad-input round, shared/reviews/badinput-2026-11-28.md):
#: before, each loaded and wrote a wrong job script, or changed nothing.
CONTRADICTIONS = [
    # Row 40: --ntasks-per-node=4 --cpus-per-task=1 on a node of 2 CPUs.
    ({'HPCML_CPUS_PER_NODE': '2'}, 'partition slurm:default has 4 GPUs a '
     'node but 2 CPUs (processor.num_cpus): a rank per GPU needs a CPU at '
     'least'),
    # Row 41: a CPU partition on a GPU cluster, the model dropped.
    ({'HPCML_GPUS_PER_NODE': ''}, 'HPCML_GPU_MODEL=A100 is set but '
     'HPCML_GPUS_PER_NODE is not, which makes a CPU partition'),
    # Row 42: ReFrame drops the resource, so the job asks for no GPU.
    ({'HPCML_GPU_RESOURCE': '--gres=gpu:{num_gpus}'}, 'HPCML_GPU_RESOURCE '
     "must be an sbatch option with {num_gpus_per_node}, got "
     "'--gres=gpu:{num_gpus}' ({num_gpus} is no field the suite fills) "
     '(did you mean num_gpus_per_node?)'),
    # Row 43: a 1-GPU case asks for 4.
    ({'HPCML_GPU_RESOURCE': '--gres=gpu:4'}, "got '--gres=gpu:4' (no "
     '{num_gpus_per_node}: every case would ask for the same count)'),
    # Row 44: '#SBATCH --account=my account', for sbatch to refuse.
    ({'HPCML_ACCOUNT': 'my account'}, "HPCML_ACCOUNT must be an account "
     "name, got 'my account' (it has blanks)"),
    ({'HPCML_SLURM_PARTITION': 'gpu booster'}, 'HPCML_SLURM_PARTITION must '
     "be a partition name, got 'gpu booster' (it has blanks)"),
    # Row 45: --cpus-per-task=250000.
    ({'HPCML_CPUS_PER_NODE': '1000000'}, 'HPCML_CPUS_PER_NODE must be an '
     "integer >= 1 and <= 4096, got '1000000'"),
    # Row 27: ReFrame polled flat out, on the cores the case measures.
    ({'HPCML_POLL_RATE_MIN': '1e9', 'config': 'config/local.py'},
     "HPCML_POLL_RATE_MIN must be a number > 0 and < 100, got '1e9'"),
    ({'HPCML_BATCH_POLL_RATE_MIN': '50'},
     "HPCML_BATCH_POLL_RATE_MIN must be a number > 0 and < 10, got '50'"),
    # Row 33: the CPU peak measured again at every start, never kept.
    ({'HPCML_CACHE_DIR': '{file}'}, 'HPCML_CACHE_DIR {file}: not a '
     'directory: fix the environment variable HPCML_CACHE_DIR'),
    ({'HPCML_PREPARED_DIR': '{file}'}, 'HPCML_PREPARED_DIR {file}: not a '
     'directory'),
    # Row 46: the jobs sourced a missing activate, and triage named numpy.
    ({'HPCML_VENV': '/nonexistent/venv'}, 'HPCML_VENV /nonexistent/venv '
     'has no bin/activate: give the virtual environment the nodes '
     'activate'),
    # Row 32: every reference, and the nightly gate, off without a word.
    ({'HPCML_REFERENCES_DIR': '{empty}'}, 'HPCML_REFERENCES_DIR {empty} '
     'holds no reference file (<workload>.yaml), so every check would run '
     'without references and pass'),
    # Issue 40: config/slurm.py could not say its A100s' memory, and the
    # memory check turned itself off: 13B and Llama 3 8B were queued on
    # one node of 80 GB GPUs, to die out of memory.
    ({'HPCML_DEVICE_MEMORY_GIB': ''}, 'partition slurm:default: the memory '
     'of its GPUs is unknown (A100 comes with 40 or 80 GB), so the memory '
     "check could not skip a case that cannot fit, which would wait in the "
     "queue to die out of memory: set extras['device_memory_gib'] to one "
     "GPU's GiB (HPCML_DEVICE_MEMORY_GIB for config/slurm.py)"),
    # Issue 40: a product name for a model key loaded, and gave no MFU.
    ({'HPCML_GPU_MODEL': 'A100-SXM4-80GB'}, 'HPCML_GPU_MODEL must be one '
     'of A100, H100-SXM, H100-PCIe, H100-NVL, GH200, H200, H200-NVL, V100, '
     "V100-PCIe, MI250X-GCD, MI250-GCD, MI300X, got 'A100-SXM4-80GB' (did "
     'you mean A100?)'),
    ({'HPCML_GPU_MODEL': 'MI250X', 'HPCML_GPUS_PER_NODE': '8'},
     "got 'MI250X' (did you mean MI250X-GCD?)"),
    # Slurm reads a bare number as minutes, ReFrame as seconds.
    ({'HPCML_MAX_TIME_LIMIT': '120'}, 'HPCML_MAX_TIME_LIMIT must be a time '
     "such as 2h, 90m, 1d12h or Slurm's 24:00:00, got '120' (a bare "
     'number: give its unit)'),
]


@pytest.mark.parametrize('env, message', CONTRADICTIONS)
def test_settings_that_contradict_or_do_nothing_stop_the_config(
        monkeypatch, tmp_path, env, message):
    '''Each in one line that names the setting, before anything is
    queued (about 0.1 s each: the config loads in this process).'''
    (tmp_path / 'empty').mkdir()
    (tmp_path / 'file').write_text('not a directory\n')

    def placed(text):
        for name in ('file', 'empty'):
            text = text.replace(f'{{{name}}}', str(tmp_path / name))
        return text

    env = dict(env)
    config = env.pop('config', 'config/slurm.py')
    for name, value in {'HPCML_GPUS_PER_NODE': '4', 'HPCML_CPUS_PER_NODE':
                        '64', 'HPCML_GPU_MODEL': 'A100',
                        'HPCML_DEVICE_MEMORY_GIB': '80', **env}.items():
        monkeypatch.setenv(name, placed(value))
    with pytest.raises(ConfigError) as err:
        load(config, config.split('/')[-1][:-3])
    assert placed(message) in str(err.value)
    assert '\n' not in str(err.value)


def test_a_hand_written_gpu_partition_is_checked_too(tmp_path):
    '''The same rules for any site configuration, not config/slurm.py's
    variables alone.'''
    part = {'name': 'gpu', 'scheduler': 'slurm', 'launcher': 'srun',
            'processor': {'num_cpus': 48},
            'devices': [{'type': 'gpu', 'num_devices': 4}]}
    assert "no resource 'gpu' to ask for them" in siteconfig.contradiction(
        'site:gpu', part, 'site.py')
    part['resources'] = [{'name': 'gpu', 'options': ['--gres=gpu:4']}]
    assert 'which ReFrame fills with {num_gpus_per_node} alone' in \
        siteconfig.contradiction('site:gpu', part, 'site.py')
    part['resources'] = [{'name': 'gpu',
                          'options': ['--gres=gpu:{num_gpus_per_node}']}]
    assert siteconfig.contradiction('site:gpu', part, 'site.py') is None
    # A local machine's counts are as found: nothing to contradict.
    local = {**part, 'scheduler': 'local', 'processor': {'num_cpus': 2},
             'resources': []}
    assert siteconfig.contradiction('local:gpu', local, 'local.py') is None


def test_a_gpu_partition_names_a_known_model_and_its_memory():
    '''Issue 40: any site configuration's GPUs are of a model key (the
    nearest named where not, with what a GCD is), and a batch partition's
    have a known memory: its extras', else its model's where the model
    has one size.'''
    part = {'name': 'gpu', 'scheduler': 'slurm', 'launcher': 'srun',
            'processor': {'num_cpus': 56},
            'devices': [{'type': 'gpu', 'num_devices': 4,
                         'model': 'MI250X'}]}
    why = siteconfig.unknown_gpu('site:gpu', part, 'site.py')
    assert why.startswith("partition site:gpu has GPUs of model 'MI250X', "
                          "which is no GPU model key (did you mean "
                          "MI250X-GCD?): MI250X-GCD is one of the two "
                          "compute dies (GCDs) of an MI250X: ROCm and "
                          "Slurm count each as a GPU, so a node of 4 "
                          "MI250X has 8 devices: name one of A100, ")
    assert why.endswith("or give extras['device_peak_flops'] and "
                        "extras['device_memory_gib'] for another, in "
                        "site.py (HPCML_GPU_MODEL for config/slurm.py)")
    # Another model, its figures given: a label.
    part['devices'][0]['model'] = 'Gaudi3'
    part['extras'] = {'device_peak_flops': 1.8e15, 'device_memory_gib': 128}
    assert siteconfig.unknown_gpu('site:gpu', part, 'site.py') is None
    # A model of one size says its memory; of two, it does not.
    part['devices'][0]['model'] = 'MI250X-GCD'
    part['extras'] = {}
    assert siteconfig.unknown_gpu('site:gpu', part, 'site.py') is None
    part['devices'][0]['model'] = 'GH200'
    assert '(GH200 comes with 96 or 144 GB)' in siteconfig.unknown_gpu(
        'site:gpu', part, 'site.py')
    part['extras'] = {'device_memory_gib': 96}
    assert siteconfig.unknown_gpu('site:gpu', part, 'site.py') is None
    # No model: its memory, at least.
    del part['devices'][0]['model']
    part['extras'] = {}
    assert '(no GPU model named)' in siteconfig.unknown_gpu(
        'site:gpu', part, 'site.py')
    # A local machine's memory is found there (nvidia-smi).
    part['scheduler'] = 'local'
    assert siteconfig.unknown_gpu('local:gpu', part, 'local.py') is None


@pytest.mark.parametrize('model, gib, peak', [
    ('MI250X-GCD', 64, 191.5e12), ('MI300X', 192, 1307.4e12),
])
def test_rocm_partitions_are_known(model, gib, peak):
    '''No ROCm machine runs here: what the suite knows of AMD's GPUs,
    held without one (an MI250X counted by its GCDs, as ROCm and Slurm
    count it; its memory and bf16 peak per GCD), and their containers
    given AMD's GPU options.'''
    from hpctestlib_ml import container, peaks
    from hpctestlib_ml.constants import DEVICE_MEMORY_GIB
    part = {'name': 'gpu', 'scheduler': 'slurm', 'launcher': 'srun',
            'processor': {'num_cpus': 56},
            'devices': [{'type': 'gpu', 'num_devices': 8, 'model': model}]}
    assert siteconfig.unknown_gpu('site:gpu', part, 'site.py') is None
    assert DEVICE_MEMORY_GIB[model] == gib
    assert peaks.device_peak(model, 'amp_bf16', None) == (peak, 'bf16')
    assert container.gpu_vendor([model] * 8, {}) == 'amd'
    assert peaks.model_key('AMD Instinct ' + model.split('-')[0]) == model


@pytest.mark.parametrize('path, system', [
    ('config/systems/alps_daint.py', 'alps-daint'),
    ('config/systems/lumi_g.py', 'lumi'),
    ('config/systems/perlmutter.py', 'perlmutter'),
    ('docs/examples/gpu_site_config.py', 'mycentre'),
])
def test_real_sites_validate(monkeypatch, path, system):
    '''The real centres' configurations (their job scripts:
    tests/test_site_configs.py), and the guide's GPU example, validate
    against ReFrame's schema and the suite's checks of every
    partition.'''
    monkeypatch.setenv('HPCML_CONTAINER_IMAGE', '/images/hpcml.img')
    site = load(path, system)
    for part in site.get('systems/0/partitions'):
        assert siteconfig.unknown_gpu(part['name'], part, path) is None
        assert part['extras']['max_time_limit'] > 0


@pytest.mark.parametrize('path', ['config/systems/alps_daint.py',
                                  'config/systems/lumi_g.py'])
def test_a_container_only_site_without_an_image_does_not_load(monkeypatch,
                                                              path):
    '''CSCS and LUMI run PyTorch in containers: without the image's
    name, one line naming the settings, before anything is queued.'''
    monkeypatch.delenv('HPCML_CONTAINER_IMAGE', raising=False)
    monkeypatch.delenv('HPCML_CONTAINER_DIR', raising=False)
    with pytest.raises(ConfigError) as err:
        load(path, 'x')
    assert str(err.value).startswith(
        f'{path} runs the suite in containers only: set '
        f'HPCML_CONTAINER_IMAGE to ')
    assert '\n' not in str(err.value)


def test_a_blank_directory_variable_is_unset(monkeypatch, tmp_path):
    '''Row 36: HPCML_VAR_DIR='   ' wrote the session into a directory
    named three spaces; a blank is unset, as every setting's is.'''
    monkeypatch.setenv('HPCML_VAR_DIR', '   ')
    monkeypatch.setenv('PWD', str(tmp_path))
    forget_config_modules()
    import importlib
    paths = importlib.import_module('hpctestlib_ml.paths')
    assert paths.VAR_DIR == str(REPO_ROOT / 'var')


@pytest.mark.parametrize('name, lost', [
    ('HPCML_TSDB_URL', 'sent to no database'),
    ('HPCML_HTTPJSON_URL', 'posted nowhere'),
])
def test_a_database_that_does_not_answer_is_said_naming_the_setting(
        monkeypatch, capsys, name, lost):
    '''Second round, rows 29 and 30: ReFrame's "httpjson: could not
    connect to server" named neither the setting nor where the records
    went (its perflogs only). A server that answers is not mentioned.'''
    import socket
    import importlib
    siteconfig = importlib.import_module('hpctestlib_ml.siteconfig')
    handlers = {'HPCML_TSDB_URL': siteconfig.tsdb_handlers,
                'HPCML_HTTPJSON_URL': siteconfig.httpjson_handlers}[name]
    with socket.socket() as listening:
        listening.bind(('127.0.0.1', 0))
        listening.listen()
        port = listening.getsockname()[1]
        monkeypatch.setenv(name, f'http://127.0.0.1:{port}/x')
        assert handlers()
        assert capsys.readouterr().err == ''
    # The port is closed now: nothing listens there.
    assert handlers()
    err = capsys.readouterr().err
    assert err.startswith(f'hpcml: {name} http://127.0.0.1:{port}')
    assert f"does not answer (Connection refused): this session's " \
           f"performance records are {lost}, only in its perflogs: start " \
           f"the server, or fix or unset {name}\n" in err
    assert err.count('\n') == 1
