"""Launchers' labels on log lines (hpctestlib_ml/parsers/labels.py): every
parser reads a labelled log as it reads the bare one."""
import pytest

from conftest import read_data
from hpctestlib_ml import triage
from hpctestlib_ml.parsers import (failures, hf_trainer, labels, matmul_rate,
                                   megatron, mllog, nccl, nccl_tests,
                                   open_clip, storage_bench,
                                   tf_cnn_benchmarks, torchvision_bench)


@pytest.mark.parametrize('line, found, rest', [
    ('[worker :11]   epoch = 0.3077', ('[worker :11]',), '  epoch = 0.3077'),
    ('[worker:0]   train_runtime', ('[worker:0]',), '  train_runtime'),
    ('[1,3]<stdout>:Iter #0: 108.3', ('[1,3]<stdout>:',), 'Iter #0: 108.3'),
    ('[0]<stderr>:x', ('[0]<stderr>:',), 'x'),
    ('[9] :::MLLOG {}', ('[9]',), ':::MLLOG {}'),
    (' 12: total images/sec: 1.0', ('12:',), 'total images/sec: 1.0'),
    ('0: [default1]: RuntimeError: boom', ('0:', '[default1]:'),
     'RuntimeError: boom'),
    ('INFO 2024-10-28T00:56:14.082965307Z [resource.labels.containerName: '
     'jax-tpu] ***** train metrics *****',
     ('INFO 2024-10-28T00:56:14.082965307Z [resource.labels.containerName: '
      'jax-tpu]',), '***** train metrics *****'),
    # Not labels: a time of day, Megatron's own "[Rank 0]", NCCL's device.
    ('12:34:56 start', (), '12:34:56 start'),
    ('[Rank 0] (after 1 iterations) memory', (),
     '[Rank 0] (after 1 iterations) memory'),
    ('host:12:34 [0] NCCL INFO x', (), 'host:12:34 [0] NCCL INFO x'),
])
def test_split(line, found, rest):
    assert labels.split(line) == (found, rest)


@pytest.mark.parametrize('line, rank', [
    ('[1,3]<stdout>:x', '3'), ('[5]<stdout>:x', '5'), ('[7] x', '7'),
    (' 4: x', '4'), ('[rank2]: x', '2'), ('[default1]: x', '1'),
    # srun's task 0 runs torchrun, whose rank 3 printed the line.
    ('0: [rank3]: x', '3'),
    ('[worker :11] x', None), ('x', None),
])
def test_rank_of(line, rank):
    assert labels.rank_of(line) == rank


@pytest.mark.parametrize('line, found, rest', [
    ('node-01:   num_layers ... 24', ('node-01:',), '  num_layers ... 24'),
    ('10.0.0.7: [default3]: x', ('10.0.0.7:', '[default3]:'), 'x'),
    # A host the text's pdsh labels do not name, and a line's own words.
    ('node-09: x', (), 'node-09: x'),
    ('RuntimeError: CUDA error', (), 'RuntimeError: CUDA error'),
])
def test_split_pdsh_labels_of_the_texts_hosts(line, found, rest):
    assert labels.split(line, ('node-01', '10.0.0.7')) == (found, rest)


@pytest.mark.parametrize('text, hosts', [
    # DeepSpeed's PDSHRunner: every line of each node behind its name; the
    # launcher's own lines (on the head node) bare.
    ('[2024-03-01 10:00:00,000] [INFO] [runner.py:555:main] cmd = pdsh\n'
     'node-01: a\nnode-02: b\nnode-01: c\nnode-01: d\nnode-02: e\n',
     ('node-01', 'node-02')),
    ('x\nlocalhost: a\nlocalhost: b\nlocalhost: c\n', ('localhost',)),
    # A program's own first words, however many: no host.
    ('Epoch: 1\nEpoch: 2\nEpoch: 3\nRuntimeError: x\nWARNING: y\n'
     'step-3: z\nstep-4: z\nstep-5: z\n', ()),
    # A host-like word on too few of the lines.
    ('n1: a\nn1: b\nn1: c\n' + 'x\n' * 20, ()),
])
def test_pdsh_hosts(text, hosts):
    assert labels.pdsh_hosts(text) == hosts


def test_strip_keeps_each_stream_together_and_bare_text_as_is():
    text = '[worker :1] a\n[worker :0] b\n[worker:1] c\nd\n[worker :0] e'
    assert labels.strip(text) == 'a\nc\nb\ne\nd'
    bare = 'Iter #0: 1.0\n12:00:00 x\n'
    assert labels.strip(bare) is bare


def labelled(text, label):
    return '\n'.join(label + line for line in text.split('\n'))


#: A log of each parser (real or the suite's own) and a figure that shows
#: it was read.
CASES = {
    'hf_trainer': (hf_trainer, ('hf_trainer',
                                'transformers4_indented_train_eval.txt'),
                   'train_samples_per_second'),
    'megatron': (megatron, ('megatron', 'mcore_cpu_2ranks_torchrun.out'),
                 'tflops_per_gpu'),
    'tf_cnn_benchmarks': (tf_cnn_benchmarks, (
        'tf_cnn_benchmarks', 'public', 'batchai_hvd8_resnet101.log'),
        'images_per_second'),
    'mllog': (mllog, ('mllog', 'mlperf', 'cosmoflow_nvidia_v1.0_dgxa100_n16'
                      '.log'), 'samples_per_second'),
    'open_clip': (open_clip, ('open_clip', 'cpu_2ranks_torchrun.err'),
                  'throughput_avg'),
    'torchvision_bench': (torchvision_bench, (
        'torchvision_resnet50', 'public', 'horovod712_pytorch_4gpu_bs32.log'),
        'images_per_second'),
    'nccl_tests': (nccl_tests, ('components',
                                'superbench_a100x8_nccl_allreduce.log'),
                   'allreduce_busbw_GBps'),
}

#: pdsh's ``host: `` (DeepSpeed's multi-node launcher, PDSHRunner) as
#: well: a Megatron-DeepSpeed job's every line carries it (issue 39).
LABELS = ('[worker :3] ', '[1,0]<stdout>:', ' 0: ', '[rank0]: ', '[2] ',
          'gpu-node-01: ')


@pytest.mark.parametrize('label', LABELS)
@pytest.mark.parametrize('name', sorted(CASES))
def test_every_parser_reads_labelled_lines_as_bare_ones(name, label):
    parser, path, figure = CASES[name]
    text = read_data(*path)
    bare = parser.extract_metrics(text)
    assert bare[figure], (name, 'the bare log gives no figure')
    assert parser.extract_metrics(labelled(text, label)) == bare


@pytest.mark.parametrize('label', LABELS)
def test_components_and_nccl_read_labelled_lines(label):
    storage = ('[storage_bench] rank 0 round 0 op read_npy bytes 1073741824 '
               'seconds 0.5 files 128 writer 4 cache fadvise')
    rate = ('[matmul_rate] rank 0 precision bf16 n 8192 iterations 10 '
            'products 10 tflops 712.31 min 705.2 max 715.02 tf32 False')
    for parser, text in ((storage_bench, storage), (matmul_rate, rate)):
        assert parser.extract_metrics(labelled(text, label)) == \
            parser.extract_metrics(text)
    text = read_data('nccl', 'ibext_sharp_nccl_1357.log')
    assert nccl.nccl_facts(labelled(text, label)) == nccl.nccl_facts(text)


def test_failures_name_the_rank_of_any_label():
    text = ('0: RuntimeError: CUDA error: out of memory\n'
            '1: RuntimeError: Connection closed by peer\n')
    assert failures.exception_line(text, rank='0') == \
        'RuntimeError: CUDA error: out of memory'
    text = ('[1,1]<stderr>:ValueError: rank one\n'
            '[1,0]<stderr>:ValueError: rank zero\n')
    assert failures.exception_line(text, rank='1') == 'ValueError: rank one'


def test_megatron_deepspeed_pdsh_labels_the_argument_dump_is_read():
    '''Every line behind pdsh's "node-0N: " (DeepSpeed's multi-node
    launcher; tests/data/unended/README.md): the argument dump is read as
    the iterations are, so the tokens/s and TFLOP/s are the bare log's.
    Before, both were null (the dump unread: no sequence length, no
    shape, no world size; issue 39).'''
    text = read_data('unended', 'megds_pdsh_2nodes.log')
    bare = '\n'.join(ln.split(': ', 1)[1] if ln.startswith('node-0') else ln
                     for ln in text.splitlines())
    metrics = megatron.extract_metrics(text)
    assert metrics == megatron.extract_metrics(bare)
    # 64 x 2048 tokens / the mean of intervals 20-50 (1842.2 ms).
    assert metrics['tokens_per_second'] == pytest.approx(
        64 * 2048 / 1.8422)
    assert metrics['tflops_per_gpu'] == pytest.approx(40.357, rel=1e-4)
    assert 'arguments block' in metrics['flops_formula']
    assert megatron.world_size(text) == 16


def test_megatron_deepspeeds_world_size_line():
    # Megatron-DeepSpeed writes "data-parallel-size" (megatron/
    # arguments.py), Megatron-LM "data-parallel size".
    assert megatron.world_size(
        'using world size: 16, data-parallel-size: 8, sequence-parallel '
        'size: 1, tensor-model-parallel size: 2, pipeline-model-parallel '
        'size: 1 ') == 16


def test_triage_reads_pdsh_labelled_failures_and_names_the_host():
    text = read_data('triage', 'public', 'dolly139_enospc_torch_save.log')
    labelled = '\n'.join('gpu-node-07: ' + ln for ln in text.split('\n'))
    bare, found = triage.triage(text), triage.triage(labelled)
    assert (found.category, found.reason) == (bare.category, bare.reason)
    assert found.node == 'gpu-node-07'
