"""Containers: the image's recipe (containers/: its pins are pyproject's,
its two front ends run the same script), the launch lines of every
container platform from one description (each option one its platform
documents), and the job scripts of the ``*Container`` checks, from reframe
--dry-run for real, against golden files. The runs under Podman:
tests/test_containers_podman.py.

Regenerate the golden files after an intended change of the job scripts:
``HPCML_UPDATE_GOLDEN=1 make test PYTEST_ARGS=tests/test_containers.py``
(tests/golden.py).
"""
import os
import re
import shlex
import subprocess
import tomllib

import pytest

import apptainer_def
from conftest import BIN, REPO
from golden import GOLDEN, check_golden, normalized
from hpctestlib_ml import container, container_launch, image
from hpctestlib_ml.constants import FRAMEWORKS
from hpctestlib_ml.container_launch import ContainerRun
from hpctestlib_ml.siteconfig import (apptainer_images,
                                      local_container_platform)

CONTAINERS = REPO / 'containers'


# The recipe
def definition():
    return apptainer_def.parse((CONTAINERS / 'hpcml.def').read_text())


def test_requirements_are_pyprojects_pins():
    with open(REPO / 'pyproject.toml', 'rb') as fp:
        extras = tomllib.load(fp)['project']['optional-dependencies']
    assert image.requirements_text().splitlines() == \
        extras['pytorch'] + extras['tensorflow']
    assert image.pins(['tensorflow-gpu']) == extras['tensorflow-gpu']
    with pytest.raises(image.ImageError, match='no extra cuda in '
                       'pyproject.toml: use docs, pytorch, tensorflow, '
                       'tensorflow-gpu, test'):
        image.pins(['cuda'])


def test_the_recipe_installs_the_requirements_and_nothing_else():
    '''setup.sh's one pip install is of requirements.txt, from the
    wheelhouse only; the front ends run setup.sh and install nothing.'''
    script = (CONTAINERS / 'setup.sh').read_text().replace('\\\n', ' ')
    installs = re.findall(r'pip install[^\n]*', script)
    assert len(installs) == 1
    assert '--no-index' in installs[0]
    assert '--find-links "$build/wheelhouse" -r "$build/requirements.txt"' \
        in installs[0]
    containerfile = (CONTAINERS / 'Containerfile').read_text()
    post = definition().sections['post']
    for front_end in (containerfile, post):
        assert 'setup.sh' in front_end and 'pip' not in front_end


def test_both_front_ends_set_the_same_environment():
    containerfile = (CONTAINERS / 'Containerfile').read_text()
    env_block = re.search(r'^ENV (.*?)(?<!\\)\n', containerfile,
                          re.M | re.S).group(1)
    podman = dict(re.findall(r'(\w+)=(\S+)', env_block))
    apptainer = dict(re.findall(r'export (\w+)=(\S+)',
                                definition().sections['environment']))
    assert podman == apptainer
    assert podman['PATH'].startswith('/opt/hpcml/bin:')


def test_definition_parses_as_apptainer_reads_it():
    d = definition()
    assert d.header == {'bootstrap': 'localimage', 'from': '{{ BASE }}'}
    # Every template has a default, so a plain `apptainer build` works.
    assert d.templates <= set(d.arguments), d.templates - set(d.arguments)
    assert set(d.sections) >= {'post', 'files', 'test', 'help', 'labels'}
    files = apptainer_def.render(d.sections['files'], d.arguments)
    assert f' {image.IMAGE_PREPARED_DIR}' in files


@pytest.mark.parametrize('section', ['post', 'environment', 'test'])
def test_scripts_are_valid_shell(section):
    d = definition()
    script = apptainer_def.render(d.sections[section], d.arguments)
    proc = subprocess.run(['sh', '-n'], input=script, text=True,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(['sh', '-n', CONTAINERS / 'setup.sh'],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_definition_lint_catches_mistakes():
    with pytest.raises(apptainer_def.DefinitionError, match='unknown section'):
        apptainer_def.parse('Bootstrap: docker\nFrom: x\n%postt\n  true\n')
    with pytest.raises(apptainer_def.DefinitionError, match='unknown header'):
        apptainer_def.parse('Bootstrap: docker\nImage: x\n')
    d = apptainer_def.parse('Bootstrap: docker\nFrom: a:{{ TAG }}\n%post\n')
    assert d.templates == {'TAG'} and d.arguments == {}


def test_the_tag_names_the_recipe_the_pins_and_the_base():
    tag = image.recipe_tag()
    assert re.fullmatch(r'[0-9a-f]{12}', tag)
    assert image.recipe_tag() == tag
    assert image.recipe_tag(['pytorch']) != tag
    assert image.recipe_tag(base='nvcr.io/nvidia/pytorch:25.02-py3') != tag
    assert image.podman_image() == f'localhost/hpcml:{tag}'


def test_the_prepared_manifest_follows_what_prepare_wrote(tmp_path):
    assert image.prepared_manifest(tmp_path / 'missing') == 'none'
    assert image.prepared_manifest(tmp_path) == 'none'
    model = tmp_path / 'gpt2_finetune' / 'models' / 'gpt2'
    model.mkdir(parents=True)
    (model / 'config.json').write_text('{}')
    first = image.prepared_manifest(tmp_path)
    assert re.fullmatch(r'[0-9a-f]{12}', first)
    (model / 'model.safetensors').write_bytes(b'x' * 10)
    assert image.prepared_manifest(tmp_path) not in ('none', first)


def test_the_wheelhouse_is_for_the_images_python():
    same = image.download_command(['pip'], 'r.txt', 'w')
    assert same == ['pip', 'download', '--disable-pip-version-check',
                    '--quiet', '--dest', 'w', '-r', 'r.txt']
    other = image.download_command(['pip'], 'r.txt', 'w', (3, 12))
    assert other[-3:] == ['--python-version', '3.12', '--only-binary=:all:']
    assert image.python_tag('Python 3.11.2\n') == (3, 11)
    with pytest.raises(image.ImageError, match='no python3'):
        image.python_tag('sh: python3: not found')


def test_the_tool_is_podman_else_apptainer():
    assert image.tool({'podman', 'apptainer'}.__contains__) == 'podman'
    assert image.tool({'apptainer'}.__contains__) == 'apptainer'
    with pytest.raises(image.ImageError, match='install-podman.sh'):
        image.tool(lambda name: False)


def test_image_command_refuses_an_unknown_extra(tmp_path):
    proc = subprocess.run([BIN / 'hpcml', 'image', '--extras', 'cuda',
                           '--tool', 'podman'], capture_output=True,
                          text=True, env={**os.environ,
                                          'HPCML_VAR_DIR': str(tmp_path)})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        'hpcml image: error: no extra cuda in pyproject.toml: use docs, pytorch, '
        'tensorflow, tensorflow-gpu, test']


# Which image, which platform
def test_image_from_option_then_config_then_the_suites():
    extras = {'container_images': {'pytorch': '/images/pt.sif'}}
    assert container.image_path('pytorch', 'Apptainer', extras,
                                '/x.sif') == '/x.sif'
    assert container.image_path('pytorch', 'Apptainer', extras) == \
        '/images/pt.sif'
    assert container.image_path('tensorflow', 'Apptainer', extras) == \
        str(image.apptainer_image())
    assert container.image_path('pytorch', 'Podman', {}) == \
        image.podman_image()
    with pytest.raises(container.ContainerError, match=re.escape(
            "no pytorch image for Pyxis: name one in the partition's "
            "extras['container_images']['pytorch']")):
        container.image_path('pytorch', 'Pyxis', {})


def test_amd_gpus_refuse_the_suites_cuda_image():
    for name in ('Podman', 'Apptainer'):
        with pytest.raises(container.ContainerError) as err:
            container.image_for('pytorch', 'amd', name, {})
        assert str(err.value) == (
            f"{container.suite_image_for(name)} is the suite's image (make "
            f"image), a CUDA image that cannot use AMD GPUs: name a ROCm "
            f"image in the partition's extras['container_images']"
            f"['pytorch'] (config/slurm.py: HPCML_CONTAINER_IMAGE or "
            f"HPCML_CONTAINER_DIR), or -S container_image=")
    # An image the site or the command line names is the site's to choose.
    site = {'container_images': apptainer_images('/images/rocm')}
    assert container.image_for('pytorch', 'amd', 'Apptainer', site) == \
        '/images/rocm/pytorch.sif'
    assert container.image_for('pytorch', 'amd', 'Podman', {},
                               'rocm/pytorch:latest') == 'rocm/pytorch:latest'
    # NVIDIA GPUs and CPU nodes take the suite's image.
    for vendor in ('nvidia', None):
        assert container.image_for('pytorch', vendor, 'Podman', {}) == \
            image.podman_image()


def test_unknown_gpu_vendor_names_the_fix():
    with pytest.raises(container.ContainerError,
                       match="set extras 'gpu_vendor'"):
        container.gpu_vendor([None], {})
    assert container.gpu_vendor(['A100', 'A100'], {}) == 'nvidia'
    assert container.gpu_vendor(['Gaudi3'], {'gpu_vendor': 'amd'}) == 'amd'


def test_local_platform_is_podman_once_the_image_is_built():
    def which(*names):
        return lambda name: name in names

    def built(*refs):
        return lambda ref: ref in refs

    assert local_container_platform(which('podman'), built(),
                                    {}) == (None, None)
    assert local_container_platform(
        which('podman'), built(image.podman_image()), {}) == ('Podman', None)
    assert local_container_platform(
        which('podman'), built('my/image:1'),
        {'HPCML_CONTAINER_IMAGE': 'my/image:1'}) == \
        ('Podman', {fw: 'my/image:1' for fw in FRAMEWORKS})
    assert local_container_platform(which('podman', 'apptainer'), built(),
                                    {}) == ('Apptainer', None)


def test_mounts_once_and_none_inside_another():
    assert container.mount_points(['/repo', '/repo/var/stage/x', '/scratch',
                                   '/scratch', '/repo2']) == \
        [('/repo', '/repo'), ('/scratch', '/scratch'), ('/repo2', '/repo2')]


def test_the_digest_joins_the_image(tmp_path):
    digest_file = tmp_path / container.DIGEST_FILE
    assert container.image_with_digest('localhost/hpcml:x', digest_file) == \
        'localhost/hpcml:x'
    digest_file.write_text('sha256:' + 'a' * 64 + '\n')
    assert container.image_with_digest('localhost/hpcml:x', digest_file) == \
        'localhost/hpcml:x@sha256:' + 'a' * 64
    sif = tmp_path / 'hpcml-x.sif'
    (tmp_path / 'hpcml-x.json').write_text('{"digest": "sha256:' + 'b' * 64
                                           + '"}')
    assert container.image_with_digest(str(sif), tmp_path / 'none') == \
        f'{sif}@sha256:' + 'b' * 64


# The launch lines, from one description
RUN = ContainerRun(
    image='img:1', command='/repo/src/task_env.sh per_task python3 -u -m x',
    mounts=(('/repo', '/repo'), ('$SCRATCH', '$SCRATCH')),
    workdir='/stage', gpu_vendor='nvidia', env=('PYTHONPATH', 'MASTER_ADDR'))


def options_of(words):
    '''The options among shell *words*: a long one up to its ``=``, a
    short one without the value it may carry (``-B/a:/a``).'''
    return [w.split('=', 1)[0] if w.startswith('--') else w[:2]
            for w in words if w.startswith('-')]


def check_documented(platform_name, words):
    documented = container_launch.DOCUMENTED[platform_name]
    undocumented = [o for o in options_of(words) if o not in documented]
    assert undocumented == [], (platform_name, undocumented)


@pytest.mark.parametrize('name', ['Podman', 'PodmanHPC'])
def test_podman_lines(name):
    launch = (container_launch.podman_launch(RUN) if name == 'Podman' else
              container_launch.podman_hpc_launch(RUN))
    words = shlex.split(launch.command)
    assert words[:2] == [{'Podman': 'podman',
                          'PodmanHPC': 'podman-hpc'}[name], 'run']
    assert '--volume=$SCRATCH:$SCRATCH' in words
    assert words[words.index('--workdir') + 1] == '/stage'
    assert '--env=PYTHONPATH' in words and '--env=SLURM*' in words
    assert '--cpu-shares=262144' in words
    gpu = {'Podman': ['--device', 'nvidia.com/gpu=all'],
           'PodmanHPC': ['--gpu']}[name]
    at = words.index('img:1')
    assert words[at - len(gpu):at] == gpu
    assert ' '.join(words[at + 1:]) == RUN.command
    assert launch.launcher_options == ()
    check_documented(name, words[1:at])


def test_pyxis_options_are_srun_options():
    launch = container_launch.pyxis_launch(RUN)
    assert [shlex.split(o)[0] for o in launch.launcher_options] == [
        '--container-image=img:1',
        '--container-mounts=/repo:/repo,$SCRATCH:$SCRATCH',
        '--container-workdir=/stage']
    assert launch.command == RUN.command
    check_documented('Pyxis', launch.launcher_options)


def test_container_engine_writes_an_edf_and_names_it(tmp_path):
    run = ContainerRun(**{**RUN.__dict__, 'annotations': (
        ('com.hooks.aws_ofi_nccl.enabled', 'true'),
        ('com.hooks.aws_ofi_nccl.variant', 'cuda12'))})
    launch = container_launch.container_engine_launch(run, '/stage')
    assert launch.launcher_options == (
        '--environment="/stage/hpcml-container.toml"',)
    check_documented('ContainerEngine', launch.launcher_options)
    write, = launch.prepare
    # The job's shell writes it: run the heredoc, read the TOML it wrote.
    edf = subprocess.run(
        ['sh', '-c', write.replace('/stage/', '') + '\ncat hpcml-container.'
         'toml'], capture_output=True, text=True, check=True,
        env={'SCRATCH': '/scratch/me', 'PATH': os.environ['PATH']},
        cwd=tmp_path).stdout
    parsed = tomllib.loads(edf)
    assert parsed == {
        'image': 'img:1', 'mounts': ['/repo:/repo', '/scratch/me:/scratch/me'],
        'workdir': '/stage',
        'annotations': {'com': {'hooks': {'aws_ofi_nccl': {
            'enabled': 'true', 'variant': 'cuda12'}}}}}
    assert set(parsed) <= set(container_launch.DOCUMENTED['ContainerEngine'])


def test_singularity_is_apptainers_line_under_its_own_name():
    '''SingularityCE (LUMI has no apptainer command): ReFrame's backend,
    the options of sylabs.io's singularity exec and GPU pages.'''
    made, launcher_options = container_launch.platform(
        'Singularity', RUN, '/stage', 'srun')
    line = made.launch_command('/stage')
    assert line == ('singularity exec -B"/repo:/repo" -B"$SCRATCH:$SCRATCH" '
                    '--pwd /stage --nv img:1 ' + RUN.command)
    assert launcher_options == []
    check_documented('Singularity', shlex.split(line)[1:-7])


def test_a_sites_own_gpu_options_replace_the_platforms():
    '''extras['container_gpu_options']: an image that brings its own ROCm
    runs without --rocm (LUMI's), or with what the site names.'''
    amd = ContainerRun(**{**RUN.__dict__, 'gpu_vendor': 'amd'})
    assert '--rocm' in container_launch.platform(
        'Singularity', amd, '/stage', 'srun')[0].launch_command('/stage')
    own = ContainerRun(**{**amd.__dict__, 'gpu_options': ()})
    line = container_launch.platform(
        'Singularity', own, '/stage', 'srun')[0].launch_command('/stage')
    assert '--rocm' not in line and '--nv' not in line
    # A platform with no documented way for a vendor, given the site's.
    assert container_launch.gpu_options('PodmanHPC', 'amd', ['--device',
                                        '/dev/kfd']) == ['--device',
                                                         '/dev/kfd']


def test_gpu_options_per_platform_and_vendor():
    table = container_launch.GPU_OPTIONS
    assert container_launch.gpu_options('Apptainer', 'amd') == ['--rocm']
    for name, vendors in table.items():
        for options, source in vendors.values():
            check_documented(name, options)
            assert source.startswith('https://'), source
        assert container_launch.gpu_options(name, None) == []
    with pytest.raises(container_launch.ContainerError) as err:
        container_launch.gpu_options('PodmanHPC', 'amd')
    assert str(err.value) == (
        "PodmanHPC has no documented way to give a container AMD GPUs "
        "(documented: nvidia): choose another of the partition's "
        "container_platforms")


def test_slurm_plugins_need_srun_and_names_are_known():
    for name in container_launch.SRUN_PLATFORMS:
        with pytest.raises(container_launch.ContainerError,
                           match=f'{name} is a Slurm plugin: it needs the '
                                 f"srun launcher, not 'local'"):
            container_launch.platform(name, RUN, '/stage', 'local')
    with pytest.raises(container_launch.ContainerError,
                       match="container platform 'Docker' unknown: use one "
                             "of Apptainer, Podman, PodmanHPC, Pyxis, "
                             "ContainerEngine, Sarus, Singularity"):
        container_launch.platform('Docker', RUN, '/stage', 'srun')


def test_the_golden_files_cite_every_source():
    '''tests/data/golden/README.md lists each golden file and every page
    the options' table cites.'''
    readme = (GOLDEN / 'README.md').read_text()
    sources = {s for options in container_launch.DOCUMENTED.values()
               for s in options.values()}
    sources |= {s for vendors in container_launch.GPU_OPTIONS.values()
                for _, s in vendors.values()}
    for source in sources:
        assert source.startswith('https://') and source in readme, source
    for path in GOLDEN.glob('*.sh'):
        assert f'`{path.name}`' in readme, path.name


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
    image_path = '/p/project/jscbenchmark/hpcml/images/pytorch.sif'
    for text in scripts.values():
        run_line = text.strip().splitlines()[-1]
        assert re.match(
            rf'srun --cpus-per-task=\d+ --kill-on-bad-exit=1 apptainer exec '
            rf'-B"{REPO}:{REPO}" -B"[^"]+:[^"]+" --pwd \S+ '
            rf'--nv {image_path} {REPO}/src/task_env.sh (per_task|torchrun) '
            rf'python3 -u -m ', run_line), run_line
        assert f'export PYTHONPATH={REPO}/src' in text
        assert f'[ -r {image_path} ] ||' in text
        # The host's PyTorch modules and venv stay out of the image's way.
        assert 'module load' not in text and 'activate' not in text


#: The generic Slurm config on 2 nodes of 4 A100 each, per platform, with
#: the image each platform's users name.
SLURM_GPU_ENV = {'HPCML_SCHEDULER': 'squeue', 'HPCML_SCALES': '2_nodes',
                 'HPCML_GPUS_PER_NODE': '4', 'HPCML_GPU_MODEL': 'A100',
                 'HPCML_DEVICE_MEMORY_GIB': '40',
                 'HPCML_CPUS_PER_NODE': '64', 'HPCML_ACCOUNT': 'myproject',
                 'HPCML_SLURM_PARTITION': 'gpu'}
PLATFORM_IMAGES = {
    'Podman': None,                 # the suite's: make image
    'PodmanHPC': 'registry.nersc.gov/myproject/hpcml:1',
    'Pyxis': 'nvcr.io#nvidia/pytorch:25.02-py3',
    'ContainerEngine': '/capstor/scratch/cscs/me/hpcml.sqsh',
    'Sarus': 'load/library/hpcml:1',
    'Apptainer': '/p/project/myproject/hpcml.sif',
}


@pytest.fixture(scope='module')
def platform_scripts(tmp_path_factory, cache_dir):
    '''{platform: (2-node torchrun job script, var)} of MMoCLIPContainer.'''
    found = {}
    for name, image_ref in PLATFORM_IMAGES.items():
        env = {**SLURM_GPU_ENV, 'HPCML_CONTAINER_PLATFORM': name}
        if image_ref:
            env['HPCML_CONTAINER_IMAGE'] = image_ref
        proc, scripts, var = dry_run(
            tmp_path_factory.mktemp(name), cache_dir, 'config/slurm.py',
            '^MMoCLIPContainer%scale=2_nodes%launch_mode=torchrun', **env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        script, = scripts.values()
        found[name] = (script, var)
    return found


@pytest.mark.integration
@pytest.mark.parametrize('name', list(PLATFORM_IMAGES))
def test_platform_job_script_is_golden(platform_scripts, name):
    script, var = platform_scripts[name]
    check_golden(f'slurm_{name.lower()}_mmoclip_2nodes_torchrun.sh',
                 normalized(script, var))


@pytest.mark.integration
@pytest.mark.parametrize('name', list(PLATFORM_IMAGES))
def test_platform_job_script_uses_documented_options(platform_scripts, name):
    '''Every option the job passes its platform (on the srun line: the
    runtime's, or srun's own for the Slurm plugins) is documented.'''
    script, _ = platform_scripts[name]
    words = shlex.split(script.strip().splitlines()[-1],
                        comments=False, posix=True)
    srun_end = next(i for i, w in enumerate(words)
                    if not w.startswith('-') and i > 0)
    srun_options = [w for w in words[1:srun_end]
                    if not w.startswith(('--cpus-per-task',
                                         '--kill-on-bad-exit'))]
    if name in container_launch.SRUN_PLATFORMS:
        check_documented(name, srun_options)
        assert words[srun_end].endswith('task_env.sh')
        return
    assert srun_options == []
    command = words[srun_end:]
    image_at = command.index(PLATFORM_IMAGES[name] or image.podman_image())
    check_documented(name, command[1:image_at])


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
        assert re.search(r' --pwd \S+ /images/pytorch.sif ', text), text
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
    '''A GPU model that is no key of the table stops config/slurm.py
    from loading, listing the keys (it loaded before, and its container
    case failed at setup for want of a GPU vendor; a hand-written
    partition may name another model with its figures and vendor:
    tests/test_configs.py).'''
    proc, _, _ = dry_run(tmp_path, cache_dir, 'config/slurm.py',
                         '^MMoCLIPContainer%', HPCML_SCHEDULER='squeue',
                         HPCML_SCALES='1_node', HPCML_GPUS_PER_NODE='4',
                         HPCML_GPU_MODEL='Gaudi3', HPCML_CPUS_PER_NODE='64',
                         HPCML_CONTAINER_DIR='/images')
    assert proc.returncode == 1
    assert ("ERROR: failed to load configuration: HPCML_GPU_MODEL must be "
            "one of A100, H100-SXM,") in proc.stdout
    assert "got 'Gaudi3': fix the environment variable HPCML_GPU_MODEL" in \
        proc.stdout
    assert 'Traceback' not in proc.stdout + proc.stderr


@pytest.mark.integration
def test_unknown_platform_stops_the_configuration_in_one_line(tmp_path,
                                                              cache_dir):
    '''An unknown HPCML_CONTAINER_PLATFORM stops config/slurm.py from
    loading, with the platforms there are (a Slurm plugin's platform
    without srun: test_slurm_plugins_need_srun_and_names_are_known;
    config/slurm.py always launches with srun).'''
    proc, _, _ = dry_run(tmp_path, cache_dir, 'config/slurm.py',
                         '^MMoCLIPContainer%', HPCML_SCHEDULER='squeue',
                         HPCML_SCALES='1_node', HPCML_CPUS_PER_NODE='64',
                         HPCML_CONTAINER_PLATFORM='Docker')
    assert proc.returncode == 1
    assert ('ERROR: failed to load configuration: HPCML_CONTAINER_PLATFORM '
            'must be one of Apptainer, Podman, PodmanHPC, Pyxis, '
            "ContainerEngine, Sarus, Singularity, got 'Docker': fix the "
            "environment "
            'variable HPCML_CONTAINER_PLATFORM (read by config/slurm.py)'
            ) in proc.stdout
    assert 'Traceback' not in proc.stdout + proc.stderr


@pytest.mark.integration
def test_no_container_checks_without_a_runtime(tmp_path, cache_dir):
    '''config/local.py lists a container platform only where its runtime
    is installed (and, for Podman, the image built).'''
    proc, scripts, _ = dry_run(tmp_path, cache_dir, 'config/local.py',
                               'MMoCLIP', PATH=f'{BIN}:{tmp_path}')
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(scripts) == 3
    assert not any('apptainer' in s or 'podman' in s
                   for s in scripts.values())
