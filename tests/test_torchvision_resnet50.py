"""PyTorch ResNet-50 with torchvision (the benchmark EESSI's test-suite and
cscs-reframe-tests run): the log parser on real logs of Horovod's
``pytorch_synthetic_benchmark.py``, its derivatives and CSCS/LUMI's
``cnn_distr.py`` (tests/data/SOURCES.md), the suite's program on this CPU
with one rank and two (torchrun, Gloo), EESSI's and CSCS's own patterns on
its log, its synthetic batch made before the timed steps, and ResNet-50's
analytic FLOPs against FlopCounterMode on torchvision's model."""
import re
import statistics
import sys

import pytest

from conftest import REPO, read_data, run_module
from hpctestlib_ml import flops
from hpctestlib_ml.parsers import hpcml_records
from hpctestlib_ml.parsers import torchvision_bench as parser

sys.path.insert(0, str(REPO / 'src'))
import torchvision_resnet50 as bench  # noqa: E402

approx = pytest.approx


def public(name):
    return parser.extract_metrics(
        read_data('torchvision_resnet50', 'public', name))


# Each log's figures as printed; the comments show they are upstream's
# definition at the printed rounding: per device = the mean of the Iter
# lines, +- = 1.96 x their population standard deviation, Total = N x both.
@pytest.mark.parametrize('name, expected', [
    # horovod#712, 4 GPUs: mean(108.3, ..., 108.3) = 1082.0 / 10 = 108.2;
    # 1.96 x pstdev = 1.24 -> 1.2; 4 x 108.2 = 432.8. The block opens with
    # a backtick and the Total line ends in a space.
    ('horovod712_pytorch_4gpu_bs32.log', dict(
        format='horovod', device='GPU', world_size=4, model='resnet50',
        batch_size=32, iterations=10, global_batch_size=128,
        images_per_second=432.8, images_per_second_conf=4.9,
        images_per_second_per_gpu=108.2, images_per_second_per_gpu_conf=1.2)),
    # horovod#2686, horovodrun -np 1 (prefix "[0]<stdout>:"): mean 124.68
    # -> 124.7, 1.96 x pstdev 3.14 -> 3.1; total = per GPU on 1 GPU.
    ('horovod2686_horovodrun_np1_gloo.log', dict(
        world_size=1, iterations=10, global_batch_size=32,
        images_per_second=124.7, images_per_second_conf=3.1,
        images_per_second_per_gpu=124.7, images_per_second_per_gpu_conf=3.1)),
    # 8 ranks, batch 96: mean 1785.15 (printed 1785.2), 8 x 1785.15 =
    # 14281.2 (the total uses the unrounded mean); conf 3.14 -> 3.1.
    ('ngc_hpc_srun_8ranks_bs96_fp16_allreduce.log', dict(
        world_size=8, batch_size=96, global_batch_size=768, iterations=10,
        images_per_second=14281.2, images_per_second_conf=25.0,
        images_per_second_per_gpu=1785.2, images_per_second_per_gpu_conf=3.1,
        time_per_step_secs=approx(96 / 1785.2))),
    # One iteration: its figure is the mean, the deviation 0.
    ('byteps_v100x4_bs32_one_iter.log', dict(
        world_size=4, iterations=1, images_per_second=1210.8,
        images_per_second_conf=0.0, images_per_second_per_gpu=302.7,
        images_per_second_per_gpu_conf=0.0,
        iteration_images_per_second=[302.7])),
    # 20 iterations: mean 329.18 -> 329.2, conf 0.63 -> 0.6.
    ('byteps_v100x4_bs64_20iters.log', dict(
        world_size=4, batch_size=64, iterations=20, images_per_second=1316.7,
        images_per_second_per_gpu=329.2, images_per_second_per_gpu_conf=0.6)),
    # CPUs, indented by 8 spaces: "per CPU", "4 CPU(s)".
    ('a64fx_fujitsu_4cpus_bs75.log', dict(
        device='CPU', world_size=4, batch_size=75, iterations=5,
        images_per_second=104.5, images_per_second_conf=0.1,
        images_per_second_per_gpu=26.1, images_per_second_per_gpu_conf=0.0)),
    # cnn_distr.py: per GPU the mean of the epoch lines (CSCS's sn.avg),
    # 2611.21 / 5 = 522.242; 16711.73 / 522.242 = 32.0 -> 32.
    ('lumi_userguide_cnn_distr_mi250x.log', dict(
        format='cscs', device='GPU', world_size=32, world_size_inferred=True,
        iterations=5, images_per_second=16711.73, images_per_second_conf=None,
        images_per_second_per_gpu=approx(522.242), model=None,
        batch_size=None)),
    # Epoch 0 is not shown but is in the total: the shown four average
    # 849.72 / 4 = 212.43; 6792.58 / 212.43 = 31.98 -> 32 ranks (the page's
    # 32 tasks); the unshown epoch was 5 x 6792.58 / 32 - 849.72 = 211.62.
    ('lumi_userguide_cnn_distr_32ranks_epochs_1_to_4.log', dict(
        format='cscs', world_size=32, iterations=4,
        images_per_second=6792.58, images_per_second_per_gpu=approx(212.43))),
])
def test_public_logs(name, expected):
    m = public(name)
    for key, value in expected.items():
        assert m[key] == value, key
    assert m['steps'] is None and m['timed_window'] is None


HOROVOD_LOGS = ['horovod712_pytorch_4gpu_bs32.log',
                'horovod2686_horovodrun_np1_gloo.log',
                'ngc_hpc_srun_8ranks_bs96_fp16_allreduce.log',
                'byteps_v100x4_bs32_one_iter.log',
                'byteps_v100x4_bs64_20iters.log',
                'a64fx_fujitsu_4cpus_bs75.log']


@pytest.mark.parametrize('name', HOROVOD_LOGS)
def test_public_logs_follow_horovods_definition(name):
    '''Per device: the mean of the iterations (within the 0.05 of the
    printed rounding), +- 1.96 x their population standard deviation;
    the total: world size x the per-device figure.'''
    m = public(name)
    rates, world = m['iteration_images_per_second'], m['world_size']
    mean, conf = bench.summary(rates)
    assert m['images_per_second_per_gpu'] == approx(mean, abs=0.051)
    assert m['images_per_second_per_gpu_conf'] == approx(conf, abs=0.051)
    assert m['images_per_second'] == approx(world * mean,
                                            abs=0.05 * world + 0.051)
    assert m['images_per_second'] / world == approx(
        m['images_per_second_per_gpu'], abs=0.051)


@pytest.mark.parametrize('name, lines', [
    ('horovod2686_horovodrun_np1_gloo.log',
     ['Img/sec per GPU: 124.7 +-3.1',
      'Total img/sec on 1 GPU(s): 124.7 +-3.1']),
    ('byteps_v100x4_bs32_one_iter.log',
     ['Img/sec per GPU: 302.7 +-0.0',
      'Total img/sec on 4 GPU(s): 1210.8 +-0.0']),
])
def test_programs_lines_are_upstreams(name, lines):
    '''From a log's own iteration figures the program's arithmetic and
    format give that log's closing lines (where the iterations' printed
    rounding leaves them exact).'''
    m = public(name)
    mean, conf = bench.summary(m['iteration_images_per_second'])
    assert bench.result_lines(mean, conf, m['world_size'], 'GPU') == lines
    assert bench.iteration_line(0, 108.26, 'GPU') == \
        'Iter #0: 108.3 img/sec per GPU'


def test_first_run_and_a_run_cut_short():
    text = ('Iter #0: 10.0 img/sec per GPU\nImg/sec per GPU: 10.0 +-0.0\n'
            'Total img/sec on 2 GPU(s): 20.0 +-0.0\n'
            'Iter #0: 99.0 img/sec per GPU\n')
    m = parser.extract_metrics(text)
    assert m['images_per_second'] == 20.0 and m['iterations'] == 1
    cut = parser.extract_metrics('Number of GPUs: 8\nRunning benchmark...\n'
                                 'Iter #0: 5.0 img/sec per GPU\n')
    assert cut['world_size'] == 8 and cut['images_per_second'] is None
    assert cut['iteration_images_per_second'] == [5.0]
    none = parser.extract_metrics('Traceback (most recent call last):\n')
    assert none['format'] is None and none['images_per_second'] is None


def run_program(tmp_path, *args, procs=1, driver=None):
    '''The program at ``--size tiny`` on this CPU: one process, or
    *procs* under torchrun (Gloo); (stdout, stderr).'''
    program = ['-c', driver] if driver else 'torchvision_resnet50'
    proc = run_module(tmp_path, program, '--size', 'tiny', *args,
                      procs=procs)
    return proc.stdout, proc.stderr


def check_own_log(text, world):
    '''What the program's log must say for *world* ranks at --size tiny
    (3 iterations of 2 batches of 4).'''
    m = parser.extract_metrics(text)
    assert m['format'] == 'horovod' and m['device'] == 'CPU'
    assert m['world_size'] == world and m['model'] == 'resnet50'
    assert m['iterations'] == 3 and m['batches_per_iteration'] == 2
    assert m['steps'] == 6 and m['global_batch_size'] == 4 * world
    # Per GPU is the total over the world size (at the printed 0.1).
    assert m['images_per_second_per_gpu'] == approx(
        m['images_per_second'] / world, abs=0.051)
    start, stop = m['timed_window']
    assert 0 < stop - start < 600
    cscs = parser.parse_cscs(text)
    assert cscs['world_size'] == world and len(
        cscs['iteration_images_per_second']) == 3
    assert cscs['images_per_second'] == approx(m['images_per_second'],
                                               abs=0.05 * world + 0.01)
    timing = hpcml_records.by_rank(text, 'timing')
    assert sorted(timing) == list(range(world))
    assert all(t['steps'] == 6 and t['data_s'] == 0.0
               for t in timing.values())
    assert sorted(hpcml_records.by_rank(text, 'device')) == list(range(world))
    # Only rank 0 prints upstream's lines.
    assert text.count('Total img/sec on') == 1
    assert text.count('Running benchmark...') == 1
    return m


def test_one_rank(tmp_path):
    stdout, _ = run_program(tmp_path)
    m = check_own_log(stdout, 1)
    assert m['images_per_second'] == m['images_per_second_per_gpu']


@pytest.mark.parametrize('options', [[], ['--fp16-allreduce']])
def test_two_ranks_under_torchrun(tmp_path, options):
    stdout, _ = run_program(tmp_path, *options, procs=2)
    check_own_log(stdout, 2)
    assert f'Allreduce: {"fp16" if options else "fp32"}' in stdout


OWN_LOGS = {1: 'torchvision_resnet50_tiny_cpu_1rank.out',
            2: 'torchvision_resnet50_tiny_cpu_2ranks_torchrun.out'}


@pytest.mark.parametrize('world', sorted(OWN_LOGS))
def test_captured_own_logs(world):
    '''The program's logs as captured on this VM (python -m
    torchvision_resnet50 --size tiny; the same under torchrun
    --nproc-per-node 2).'''
    check_own_log(read_data('torchvision_resnet50', OWN_LOGS[world]), world)


#: EESSI's patterns (PyTorch_torchvision.py, 209966b3) and CSCS's
#: (pytorch_test_base.py, 2f813557), as their checks apply them.
EESSI_TOTAL = r'Total img/sec on [0-9]+ .PU\(s\):\s+(?P<perf>\S+)'
EESSI_PER_CPU = r'Img/sec per CPU:\s+(?P<perf_per_cpu>\S+)'
EESSI_SANITY = r'Total img/sec on %s .PU\(s\):.*'
CSCS_EPOCH = r'Epoch\s+\d+\:\s+(?P<samples_per_sec_per_gpu>\S+)\s+images'
CSCS_TOTAL = r'Total average: (?P<samples_per_sec_total>\S+)\s+images'


def test_eessis_and_cscss_patterns_read_the_programs_log():
    text = read_data('torchvision_resnet50', OWN_LOGS[2])
    m = parser.extract_metrics(text)
    assert re.search(EESSI_SANITY % 2, text)
    assert float(re.search(EESSI_TOTAL, text).group('perf')) == \
        m['images_per_second']
    assert float(re.search(EESSI_PER_CPU, text).group('perf_per_cpu')) == \
        m['images_per_second_per_gpu']
    epochs = [float(v) for v in re.findall(CSCS_EPOCH, text)]
    assert len(epochs) == 3
    assert statistics.fmean(epochs) == approx(
        m['images_per_second_per_gpu'], abs=0.051)
    total = float(re.search(CSCS_TOTAL, text).group(1))
    assert total == approx(m['images_per_second'], abs=0.11)


SLEEP = 2.0

DRIVER = '''
import sys, time
import torchvision_resnet50.__main__ as program
make = program.synthetic_batch
def slow(*args, **kwargs):
    started = time.time()
    time.sleep({sleep})
    batch = make(*args, **kwargs)
    print(f'[made] {{started}} {{time.time()}}', file=sys.stderr, flush=True)
    return batch
program.synthetic_batch = slow
sys.exit(program.main(sys.argv[1:]))
'''


def test_synthetic_data_is_made_before_the_timed_steps(tmp_path):
    '''The batch is made once, before the warm-up, and never while the
    iterations are timed: with its making slowed by SLEEP seconds, the
    timed region starts after it ends and the iterations' rate is the
    steps' own (the timing record's seconds are those of the steps).'''
    stdout, stderr = run_program(tmp_path, driver=DRIVER.format(sleep=SLEEP))
    made = [tuple(map(float, line.split()[1:]))
            for line in stderr.splitlines() if line.startswith('[made] ')]
    assert len(made) == 1, stderr[-2000:]
    m = parser.extract_metrics(stdout)
    start, stop = m['timed_window']
    assert made[0][1] <= start
    record, = hpcml_records.records(stdout, 'timing')
    assert record['compute_s'] <= stop - start + 0.01
    # Every iteration's rate from the time of its own 2 steps: none of
    # them can have waited the SLEEP seconds.
    seconds = [4 * 2 / r for r in m['iteration_images_per_second']]
    assert sum(seconds) == approx(record['compute_s'], rel=0.05)


def test_size_presets_and_upstream_defaults():
    sys.path.insert(0, str(REPO / 'src'))
    from torchvision_resnet50.__main__ import parse_args
    args = parse_args([])
    # Horovod's and EESSI's defaults.
    assert (args.batch_size, args.num_warmup_batches,
            args.num_batches_per_iter, args.num_iters, args.image_size,
            args.model) == (32, 10, 10, 10, 224, 'resnet50')
    tiny = parse_args(['--size', 'tiny', '--num-iters', '5'])
    assert (tiny.image_size, tiny.batch_size, tiny.num_iters) == (32, 4, 5)


def test_analytic_flops_are_torchvisions_resnet50():
    '''flops.resnet50_forward_flops (v1.5: stride on the 3x3, as
    torchvision) is FlopCounterMode's count of torchvision's resnet50 at
    224 px exactly (convolutions and the classifier; it counts no batch
    norm, ReLU or pooling), counted on the meta device (no arithmetic).'''
    import torch
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode
    with torch.device('meta'):
        model = torchvision.models.resnet50(weights=None)
        images = torch.empty(1, 3, 224, 224)
    with FlopCounterMode(display=False) as counter:
        model(images)
    assert counter.get_total_flops() == flops.resnet50_forward_flops(224)
    assert flops.resnet50_forward_flops(224) == approx(8.18e9, rel=0.001)
    # 24.5 GFLOP per trained image: what MFU divides by.
    assert flops.training_flops(flops.resnet50_forward_flops(224)) == \
        approx(24.5e9, rel=0.002)


def test_a_training_step_costs_three_forwards():
    '''The 3x of flops.training_flops on the program's own step at 32 px
    (CPU, batch 2): FlopCounterMode over forward and backward counts
    2.97 forwards (the stem's input needs no gradient: 2.8% of a forward
    less at 32 px, 1.4% at 224); at 32 px the analytic figure is again
    the count, and the model has torchvision's 25,557,032 parameters.'''
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from torchvision_resnet50.__main__ import build_model, synthetic_batch
    cpu = torch.device('cpu')
    model = build_model('resnet50', cpu, channels_last=False)
    images, labels = synthetic_batch(2, 32, cpu, 0, channels_last=False)
    with FlopCounterMode(display=False) as counter:
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        forward = counter.get_total_flops()
        loss.backward()
    assert forward == 2 * flops.resnet50_forward_flops(32)
    assert counter.get_total_flops() == approx(
        flops.training_flops(forward), rel=0.02)
    assert sum(p.numel() for p in model.parameters()) == 25_557_032


def test_the_timed_iterations_split_the_steps_evenly():
    from hpctestlib_ml.workloads.torchvision_resnet50 import \
        batches_per_iteration
    assert batches_per_iteration(100, 10) == 10     # EESSI's 10 x 10
    assert batches_per_iteration(6, 2) == 2
    assert batches_per_iteration(3, 2) == 1         # -S steps=3
    assert batches_per_iteration(12, 10) == 6
    assert batches_per_iteration(7, 10) == 1
    assert batches_per_iteration(2, 2) == 2


# The check's jobs, as a site's Slurm would get them (reframe --dry-run on
# the JUWELS Booster config: 4 A100s a node).

@pytest.fixture(scope='module')
def juwels_jobs(tmp_path_factory, cache_dir):
    from test_reframe_dryrun import juwels_scripts
    var = tmp_path_factory.mktemp('juwels-torchvision') / 'var'
    return juwels_scripts(var, cache_dir, '^TorchvisionResNet50%')


@pytest.mark.integration
def test_benchmark_size_runs_eessis_arguments_one_task_per_gpu(juwels_jobs):
    text = juwels_jobs['TorchvisionResNet50%scale=2_nodes%'
                       'launch_mode=per_task']
    assert '#SBATCH --ntasks=8' in text and '--gres=gpu:4' in text
    line = text.strip().splitlines()[-1]
    assert line.startswith('srun ')
    assert line.endswith(
        '-m torchvision_resnet50 --batch-size 32 --image-size 224 '
        '--num-warmup-batches 10 --num-batches-per-iter 10 --num-iters 10')


@pytest.mark.integration
def test_torchrun_starts_a_nodes_four_ranks(juwels_jobs):
    text = juwels_jobs['TorchvisionResNet50%scale=2_nodes%'
                       'launch_mode=torchrun']
    line = text.strip().splitlines()[-1]
    assert '--nnodes=2 --nproc-per-node=4' in line
    assert line.endswith('-m torchvision_resnet50 -- --batch-size 32 '
                         '--image-size 224 --num-warmup-batches 10 '
                         '--num-batches-per-iter 10 --num-iters 10')
