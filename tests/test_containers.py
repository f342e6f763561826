"""Containers: the Apptainer definition files (linted: Apptainer is not
installable here) and the job scripts of the ``*Container`` checks, from
reframe --dry-run for real, against golden files.

Regenerate the golden files after an intended change of the job scripts:
``HPCML_UPDATE_GOLDEN=1 make test PYTEST_ARGS=tests/test_containers.py``.
"""
import importlib.metadata
import os
import re
import subprocess
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

import apptainer_def
from conftest import BIN, DATA, REPO
from hpctestlib_ml import container
from hpctestlib_ml.constants import FRAMEWORKS
from hpctestlib_ml.siteconfig import apptainer_settings

CONTAINERS = REPO / 'containers'
GOLDEN = DATA / 'golden'


# The definition files
def definition(framework):
    return apptainer_def.parse((CONTAINERS / f'{framework}.def').read_text())


def test_a_definition_file_per_framework():
    assert sorted(p.stem for p in CONTAINERS.glob('*.def')) == \
        sorted(FRAMEWORKS)


@pytest.mark.parametrize('framework', FRAMEWORKS)
def test_definition_parses_as_apptainer_reads_it(framework):
    d = definition(framework)
    assert d.header['bootstrap'] == 'docker'
    # Every template has a default, so a plain `apptainer build` works.
    assert d.templates <= set(d.arguments), d.templates - set(d.arguments)
    base = apptainer_def.render(d.header['from'], d.arguments)
    assert re.fullmatch(rf'nvcr\.io/nvidia/{framework}:\d\d\.\d\d-[\w.-]+',
                        base), base
    labels = dict(line.split(None, 1) for line in
                  d.sections['labels'].splitlines() if line.strip())
    assert labels['org.hpcml.framework'] == framework
    assert set(d.sections) >= {'post', 'test', 'help', 'labels'}


@pytest.mark.parametrize('framework', FRAMEWORKS)
@pytest.mark.parametrize('section', ['post', 'environment', 'test'])
def test_scripts_are_valid_shell(framework, section):
    d = definition(framework)
    script = apptainer_def.render(d.sections[section], d.arguments)
    # Apptainer runs %post and %test with /bin/sh.
    proc = subprocess.run(['sh', '-n'], input=script, text=True,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr


def pyproject_pins(extra):
    with open(REPO / 'pyproject.toml', 'rb') as fp:
        requirements = tomllib.load(fp)['project']['optional-dependencies'][
            extra]
    return dict(re.fullmatch(r'([\w\[\],.-]+)==([\w.]+)', r).groups()
                for r in requirements)


def test_pytorch_image_pins_equal_pyproject_except_the_framework():
    post = definition('pytorch').sections['post']
    in_image = dict(re.findall(r"'([\w\[\],.-]+)==([\w.]+)'", post))
    expected = {name: version for name, version in
                pyproject_pins('pytorch').items()
                if name not in ('torch', 'torchvision')}
    assert in_image == expected
    # NGC's torch stays: pip installs against a constraints file of it.
    assert '-c /opt/hpcml-constraints.txt' in post


#: torch of each NGC PyTorch release (``nvcr.io/nvidia/pytorch:<tag>-py3``,
#: Python 3.12 in all of them): NVIDIA's "PyTorch for Jetson Platform"
#: release notes, table 1, "PyTorch compatibility with NVIDIA containers"
#: (April 2026; a copy at index id 52208439512), which names the framework
#: container of each torch build. Confirmed for 25.01 and 25.02 by
#: ``torch.__version__`` printed in those images (index ids 52174548262:
#: ``2.6.0a0+ecf3bae40a.nv25.01``; 52484808707: ``2.7.0a0+6c54963f75``).
NGC_PYTORCH = {
    '25.01': '2.6.0a0+ecf3bae40a', '25.02': '2.7.0a0+6c54963f75',
    '25.03': '2.7.0a0+7c8ec84dab', '25.04': '2.7.0a0+79aa17489c',
    '25.05': '2.8.0a0+5228986c39', '25.06': '2.8.0a0+5228986c39',
    '25.08': '2.8.0a0+34c6371d24', '25.09': '2.9.0a0+50eac811a6',
    '25.10': '2.9.0a0+145a3a7bda', '25.11': '2.10.0a0+b558c986e8',
    '25.12': '2.10.0a0+b4e4ee81d3', '26.01': '2.10.0a0+a36e1d39eb',
    '26.02': '2.11.0a0+eb65b36914', '26.03': '2.11.0a0+a6c236b9fd1',
}
NGC_PYTHON = '3.12'


def image_pins():
    """(name, extras, version) of each package %post installs."""
    post = definition('pytorch').sections['post']
    return [(name, set(filter(None, extras.split(','))), version)
            for name, extras, version in re.findall(
                r"'([\w.-]+)(?:\[([\w,]+)\])?==([\w.]+)'", post)]


def torch_requirements(name, extras):
    """*name*'s requirements on torch, with the extras the programs use
    (transformers with PyTorch: its ``torch`` extra), for NGC's Python."""
    extras = extras | ({'torch'} if name == 'transformers' else set())
    found = []
    for line in importlib.metadata.requires(name) or []:
        req = Requirement(line)
        if canonicalize_name(req.name) != 'torch':
            continue
        env = {'python_version': NGC_PYTHON, 'sys_platform': 'linux',
               'platform_system': 'Linux', 'platform_machine': 'x86_64'}
        if req.marker is None or any(req.marker.evaluate({**env, 'extra': e})
                                     for e in extras | {''}):
            found.append(req)
    return found


def ngc_torch_problems(tag):
    """Why NGC *tag*'s torch cannot stay under the def's pins: pip keeps
    an installed torch when every requirement's specifier contains its
    version with pre-releases allowed (pip/_internal/resolution/
    resolvelib/factory.py, ``contains(installed_dist.version,
    prereleases=True)``)."""
    torch = NGC_PYTORCH[tag]
    problems = []
    for name, extras, version in image_pins():
        # The metadata read is the pinned release's own.
        assert importlib.metadata.version(name) == version, name
        python = importlib.metadata.metadata(name)['Requires-Python']
        if python and not SpecifierSet(python).contains(NGC_PYTHON):
            problems.append(f'{name}=={version} needs Python {python}')
        for req in torch_requirements(name, extras):
            if not req.specifier.contains(torch, prereleases=True):
                problems.append(f'{name}=={version} needs {req}, NGC '
                                f'{tag} has torch {torch}')
    return problems


def test_ngc_torch_satisfies_every_pin_of_the_image():
    d = definition('pytorch')
    tag = re.fullmatch(r'(\d\d\.\d\d)-py3', d.arguments['NGC_TAG']).group(1)
    assert ngc_torch_problems(tag) == []


def test_the_pin_check_catches_a_torch_below_a_pin():
    # NGC 25.01's 2.6.0a0 is a pre-release of 2.6.0: below >= 2.6.0.
    problems = ngc_torch_problems('25.01')
    assert 'megatron-core==0.16.1 needs torch>=2.6.0, NGC 25.01 has torch ' \
        '2.6.0a0+ecf3bae40a' in problems
    assert any(p.startswith('transformers==5.23.0 needs torch>=2.6')
               for p in problems)


def test_ngc_global_constraints_do_not_hold_the_pins():
    # NGC >= 25.03 sets PIP_CONSTRAINT to its whole image's versions; the
    # install clears it and holds only torch and torchvision.
    post = definition('pytorch').sections['post']
    assert re.search(r'PIP_CONSTRAINT= python3 -m pip install .*\n\s*'
                     r'-c /opt/hpcml-constraints.txt', post)


def run_keras_check(tmp_path, keras_version=None):
    '''The TensorFlow image's Keras check (its %post line that imports
    keras), run by this environment's Python, with a stand-in keras of
    *keras_version* where given.'''
    post = apptainer_def.render(definition('tensorflow').sections['post'],
                                definition('tensorflow').arguments)
    line, = [s.strip() for s in post.splitlines()
             if s.strip().startswith("python3 -c 'import sys, keras")]
    tmp_path = tmp_path / (keras_version or 'installed')
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(parents=True)
    wrapper = bin_dir / 'python3'
    wrapper.write_text(f'#!/bin/sh\nexec {BIN / "python"} "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, 'PATH': f'{bin_dir}:{os.environ["PATH"]}'}
    if keras_version:
        (tmp_path / 'keras').mkdir()
        (tmp_path / 'keras' / '__init__.py').write_text(
            f'__version__ = {keras_version!r}\n')
        env['PYTHONPATH'] = str(tmp_path)
    return subprocess.run(['sh', '-c', line], env=env, capture_output=True,
                          text=True)


def test_tensorflow_image_build_stops_without_keras_3(tmp_path):
    pytest.importorskip('keras')
    assert run_keras_check(tmp_path).returncode == 0   # .venv's Keras 3
    proc = run_keras_check(tmp_path, '2.15.0')
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        'containers/tensorflow.def: keras 2.15.0 in this image, '
        'src/resnet50_tf needs Keras 3: choose another NGC_TAG (TensorFlow '
        '2.16 or later)')


def test_definition_lint_catches_mistakes():
    with pytest.raises(apptainer_def.DefinitionError, match='unknown section'):
        apptainer_def.parse('Bootstrap: docker\nFrom: x\n%postt\n  true\n')
    with pytest.raises(apptainer_def.DefinitionError, match='unknown header'):
        apptainer_def.parse('Bootstrap: docker\nImage: x\n')
    d = apptainer_def.parse('Bootstrap: docker\nFrom: a:{{ TAG }}\n%post\n')
    assert d.templates == {'TAG'} and d.arguments == {}


# The pure functions behind the container runs
def test_image_from_option_then_config_then_repository():
    extras = {'container_images': {'pytorch': '/images/pt.sif'}}
    assert container.image_path('pytorch', extras, '/x.sif') == '/x.sif'
    assert container.image_path('pytorch', extras) == '/images/pt.sif'
    assert container.image_path('tensorflow', extras) == \
        str(REPO / 'containers' / 'tensorflow.sif')


@pytest.mark.parametrize('models, extras, options', [
    (['A100', 'A100'], {}, ['--nv']),
    (['MI250-GCD'], {}, ['--rocm']),
    (['Gaudi3'], {'gpu_vendor': 'amd'}, ['--rocm']),
    ([], {}, []),
])
def test_gpu_option_follows_the_vendor(models, extras, options):
    assert container.runtime_options(
        container.gpu_vendor(models, extras)) == options


def test_amd_gpus_refuse_the_repositorys_cuda_image():
    defaults = apptainer_settings()['extras']      # no HPCML_CONTAINER_DIR
    for extras in ({}, defaults):
        with pytest.raises(container.ContainerError) as err:
            container.image_for('pytorch', 'amd', extras)
        assert str(err.value) == (
            f"{REPO}/containers/pytorch.sif is built from "
            f"containers/pytorch.def, a CUDA image that cannot use AMD GPUs: "
            f"name a ROCm image in the partition's "
            f"extras['container_images']['pytorch'] (config/slurm.py: "
            f"HPCML_CONTAINER_DIR), or -S container_image=")
    # An image the site or the command line names is the site's to choose.
    site = apptainer_settings('/images/rocm')['extras']
    assert container.image_for('pytorch', 'amd', site) == \
        '/images/rocm/pytorch.sif'
    assert container.image_for('pytorch', 'amd', defaults,
                               '/scratch/rocm.sif') == '/scratch/rocm.sif'
    # NVIDIA GPUs and CPU nodes take the repository's image.
    for vendor in ('nvidia', None):
        assert container.image_for('pytorch', vendor, defaults) == \
            str(REPO / 'containers' / 'pytorch.sif')


def test_unknown_gpu_vendor_names_the_fix():
    with pytest.raises(container.ContainerError,
                       match="set extras 'gpu_vendor'"):
        container.gpu_vendor([None], {})
    with pytest.raises(container.ContainerError, match='use one of nvidia'):
        container.runtime_options('intel')


# Job scripts, generated by reframe --dry-run
def dry_run(tmp_path, cache_dir, config, pattern, *options, **env):
    tmp_path.mkdir(parents=True, exist_ok=True)
    var = tmp_path / 'var'
    full_env = {**os.environ, 'HPCML_VAR_DIR': str(var),
                'HPCML_CACHE_DIR': str(cache_dir), **env}
    full_env.pop('RFM_CONFIG_FILES', None)
    proc = subprocess.run(
        [BIN / 'reframe', '-C', REPO / config, '-c', REPO / 'checks',
         '-n', pattern, '--dry-run', *options], env=full_env, cwd=tmp_path,
        capture_output=True, text=True, stdin=subprocess.DEVNULL)
    scripts = {p.parent.name: p.read_text()
               for p in (var / 'stage').rglob('rfm_job.sh')}
    return proc, scripts, var


def normalized(script, var):
    '''*script* without what differs between checkouts and runs.'''
    script = script.replace(str(var), '$VAR').replace(str(REPO), '$REPO')
    return re.sub(r'_[0-9a-f]{8}\b', '_<hash>', script)


def check_golden(name, text):
    path = GOLDEN / name
    if os.environ.get('HPCML_UPDATE_GOLDEN'):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f'{name} changed (see module docstring)'


@pytest.fixture(scope='module')
def juwels_container_scripts(tmp_path_factory, cache_dir):
    tmp = tmp_path_factory.mktemp('juwels-container')
    proc, scripts, var = dry_run(
        tmp, cache_dir, 'config/systems/juwels_booster.py',
        '^MMoCLIPContainer%', HPCML_ACCOUNT='jscbenchmark',
        HPCML_CONTAINER_DIR='/p/project/jscbenchmark/hpcml/images')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    return scripts, var


@pytest.mark.integration
def test_juwels_container_job_script_is_golden(juwels_container_scripts):
    scripts, var = juwels_container_scripts
    two_node_torchrun, = [s for s in scripts.values()
                          if '#SBATCH --ntasks=2\n' in s
                          and 'torch.distributed.run' in s]
    check_golden('juwels_booster_mmoclip_container_2nodes_torchrun.sh',
                 normalized(two_node_torchrun, var))


@pytest.mark.integration
def test_juwels_container_runs_use_the_image_not_the_modules(
        juwels_container_scripts):
    scripts, _ = juwels_container_scripts
    # 1, 2, 4, 8 and 16 nodes in both launch modes.
    assert len(scripts) == 10
    image = '/p/project/jscbenchmark/hpcml/images/pytorch.sif'
    for text in scripts.values():
        run_line = text.strip().splitlines()[-1]
        assert re.match(
            rf'srun --cpus-per-task=\d+ --kill-on-bad-exit=1 apptainer exec '
            rf'-B"{REPO}:{REPO}" -B"[^"]+:/rfm_workdir" --pwd /rfm_workdir '
            rf'--nv {image} {REPO}/src/task_env.sh (per_task|torchrun) '
            rf'python3 -u -m ', run_line), run_line
        assert f'export PYTHONPATH={REPO}/src' in text
        assert f'[ -r {image} ] ||' in text
        # The host's PyTorch modules and venv stay out of the image's way.
        assert 'module load' not in text and 'activate' not in text


@pytest.mark.integration
def test_amd_gpus_get_rocm_and_cpu_nodes_no_gpu_option(tmp_path, cache_dir):
    env = {'HPCML_SCHEDULER': 'squeue', 'HPCML_SCALES': '1_node',
           'HPCML_CONTAINER_DIR': '/images', 'HPCML_CPUS_PER_NODE': '64'}
    proc, scripts, _ = dry_run(tmp_path / 'amd', cache_dir, 'config/slurm.py',
                               '^MMoCLIPContainer%', HPCML_GPUS_PER_NODE='8',
                               HPCML_GPU_MODEL='MI250-GCD', **env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(scripts) == 2
    for text in scripts.values():
        assert ' --rocm /images/pytorch.sif ' in text
        assert ' --nv ' not in text

    proc, scripts, _ = dry_run(tmp_path / 'cpu', cache_dir, 'config/slurm.py',
                               '^MMoCLIPContainer%', **env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(scripts) == 2
    for text in scripts.values():
        assert ' --pwd /rfm_workdir /images/pytorch.sif ' in text
        assert '--model CLIP-tiny' in text


@pytest.mark.integration
def test_image_from_the_command_line(tmp_path, cache_dir):
    proc, scripts, _ = dry_run(
        tmp_path, cache_dir, 'config/systems/juwels_booster.py',
        '^MMoCLIPContainer%scale=1_node%launch_mode=per_task',
        '-S', 'container_image=/scratch/my-pytorch.sif')
    assert proc.returncode == 0, proc.stdout[-3000:]
    text, = scripts.values()
    assert ' --nv /scratch/my-pytorch.sif ' in text


@pytest.mark.integration
def test_unknown_gpu_model_fails_with_the_fix(tmp_path, cache_dir):
    proc, _, _ = dry_run(tmp_path, cache_dir, 'config/slurm.py',
                         '^MMoCLIPContainer%', HPCML_SCHEDULER='squeue',
                         HPCML_SCALES='1_node', HPCML_GPUS_PER_NODE='4',
                         HPCML_GPU_MODEL='Gaudi3', HPCML_CPUS_PER_NODE='64',
                         HPCML_CONTAINER_DIR='/images')
    assert proc.returncode == 1
    assert ("GPU vendor of Gaudi3 unknown: set extras 'gpu_vendor' ('nvidia' "
            "or 'amd') of the partition") in proc.stdout
    assert 'Traceback' not in proc.stdout + proc.stderr


@pytest.mark.integration
def test_no_container_checks_without_a_runtime(tmp_path, cache_dir):
    '''config/local.py lists Apptainer only where it is installed.'''
    proc, scripts, _ = dry_run(tmp_path, cache_dir, 'config/local.py',
                               'MMoCLIP', PATH=f'{BIN}:/usr/bin:/bin')
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(scripts) == 3
    assert not any('apptainer' in s for s in scripts.values())
