"""The component checks' JUWELS Booster job scripts, generated for real by
reframe --dry-run (config/systems/juwels_booster.py: 4 A100 a node): the
same scales and launch modes as the training checks, the benchmark sizes'
arguments, the storage directory from the partition's extras."""
import pytest

from test_reframe_dryrun import juwels_scripts

pytestmark = pytest.mark.integration

SCALES = ('1_node', '2_nodes', '4_nodes', '8_nodes', '16_nodes')


@pytest.fixture(scope='module')
def jobs(tmp_path_factory, cache_dir):
    var = tmp_path_factory.mktemp('juwels-components') / 'var'
    return juwels_scripts(var, cache_dir,
                          '^(Collectives|MatmulRate|Storage)%')


def job(jobs, check, scale, mode):
    return jobs[f'{check}%scale={scale}%launch_mode={mode}']


def run_line(text):
    return text.strip().splitlines()[-1]


@pytest.mark.parametrize('check', ['Collectives', 'MatmulRate', 'Storage'])
def test_every_scale_in_both_launch_modes(jobs, check):
    names = {n for n in jobs if n.startswith(check + '%')}
    assert names == {f'{check}%scale={s}%launch_mode={m}'
                     for s in SCALES for m in ('per_task', 'torchrun')}


def test_collectives_run_nccl_tests_sizes_on_every_gpu(jobs):
    text = job(jobs, 'Collectives', '2_nodes', 'per_task')
    assert '#SBATCH --ntasks=8' in text and '--gres=gpu:4' in text
    assert 'export NCCL_DEBUG=${NCCL_DEBUG:-INFO}' in text
    line = run_line(text)
    assert line.startswith('srun ')
    assert line.endswith(
        '-m collectives -b 1K -e 1G -f 2 -n 20 -w 5 --ops '
        'all_reduce,all_gather,reduce_scatter --precision fp32')
    torchrun = run_line(job(jobs, 'Collectives', '2_nodes', 'torchrun'))
    assert '--nnodes=2 --nproc-per-node=4' in torchrun
    assert torchrun.endswith('-m collectives -- -b 1K -e 1G -f 2 -n 20 '
                             '-w 5 --ops all_reduce,all_gather,'
                             'reduce_scatter --precision fp32')


def test_matmul_rate_measures_every_gpu_precision(jobs):
    line = run_line(job(jobs, 'MatmulRate', '1_node', 'per_task'))
    # Timed in seconds on a GPU: a sustained rate, not a burst's
    # (workloads/matmul_rate.py, the full size).
    assert line.endswith('-m matmul_rate --matrix-size 8192 --iterations '
                         '10 --products 10 --warmup 3 --warmup-seconds 1.0 '
                         '--measure-seconds 2.0 --precisions '
                         'bf16,fp16,tf32,fp32')
    assert ' --cpu ' not in line + ' '


def test_storage_writes_to_the_partitions_scratch(jobs):
    '''JUWELS' GPFS scratch ($SCRATCH, expanded by the job's shell), the
    benchmark's data and Megatron 800M's checkpoint with Adam.'''
    line = run_line(job(jobs, 'Storage', '4_nodes', 'per_task'))
    assert line.endswith(
        '-m storage_bench --dir "$SCRATCH" --size benchmark --formats '
        'npy,npz,tfrecord,text --bytes-per-rank 1073741824 '
        '--checkpoint-bytes 10905108480 --rounds 3')


def test_storage_in_the_image_sees_the_directory_it_measures(
        tmp_path, cache_dir):
    scripts = juwels_scripts(tmp_path / 'var', cache_dir,
                             '^StorageContainer%scale=1_node%'
                             'launch_mode=per_task')
    line = run_line(scripts['StorageContainer%scale=1_node%'
                            'launch_mode=per_task'])
    assert ' apptainer exec ' in line
    assert ' -B"$SCRATCH:$SCRATCH" ' in line
    assert '-m storage_bench --dir "$SCRATCH" ' in line
