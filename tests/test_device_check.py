"""What the ranks' [hpcml] records say of a run (hpctestlib_ml/
device_check.py), with the records GPU nodes print."""
import sys

from conftest import REPO
from hpctestlib_ml import device_check
from hpctestlib_ml.parsers import hpcml_records

sys.path.insert(0, str(REPO / 'src'))
import hpcml_log  # noqa: E402


def gpu(rank, name='NVIDIA H100 80GB HBM3', tf32=True, index=None):
    return {'rank': rank, 'local_rank': rank % 4, 'kind': 'gpu',
            'backend': 'cuda', 'index': rank % 4 if index is None else index,
            'count': 4, 'name': name, 'capability': '9.0', 'tf32': tf32,
            'runtime': 'cuda 12.8', 'framework': 'torch 2.11.0',
            'nccl': '2.27.3', 'visible': 'CUDA_VISIBLE_DEVICES=0,1,2,3'}


CPU_FALLBACK = {'rank': 0, 'local_rank': 0, 'kind': 'cpu', 'backend': 'cpu',
                'index': None, 'count': 72, 'name': 'aarch64',
                'capability': None, 'tf32': False, 'runtime': 'cuda 13.0',
                'framework': 'torch 2.14.1+cu130', 'nccl': None,
                'visible': ''}


def test_records_round_trip_through_a_torn_log():
    text = '\n'.join([
        'hpcml launch: node=n1 task=0', hpcml_log.record('device', **gpu(0)),
        '[hpcml] device {"rank": 1, "kind": "gp',           # cut short
        '0: ' + hpcml_log.record('device', **gpu(2)),        # srun --label
        hpcml_log.record('memory', rank=0, peak_allocated_MiB=1.5,
                         peak_reserved_MiB=2.0, total_MiB=81559.0)])
    assert [r['rank'] for r in hpcml_records.records(text, 'device')] == \
        [0, 2]
    assert hpcml_records.by_rank(text, 'memory')[0]['total_MiB'] == 81559.0


def test_a_gpu_case_that_trained_on_the_cpu_fails_in_one_line():
    problems = device_check.device_problems(
        [CPU_FALLBACK], 'gpu', 1, 'cluster:gpu', 'GH200')
    assert problems == [
        '1 of 1 ranks ran on cpu (aarch64, torch 2.14.1+cu130 built for '
        'cuda 13.0), but partition cluster:gpu has GPUs']


def test_a_cpu_case_that_found_a_gpu_fails():
    problems = device_check.device_problems([gpu(0)], 'cpu', 1, 'local:cpu')
    assert 'ran on gpu' in problems[0] and 'no GPU in this case' in problems[0]


def test_every_rank_must_say_what_it_ran_on():
    problems = device_check.device_problems(
        [gpu(0), gpu(1), gpu(3)], 'gpu', 4, 'p', 'H100-SXM')
    assert problems == ['3 of 4 ranks printed their device (missing: [2])']
    assert 'did not say' in device_check.device_problems([], 'gpu', 4,
                                                         'p')[0]


def test_another_gpu_than_the_config_says_fails_naming_the_fix():
    problems = device_check.device_problems(
        [gpu(0, name='NVIDIA H100 PCIe')], 'gpu', 1, 'site:booster',
        'H100-SXM')
    assert problems and 'H100-PCIe' in problems[0] and \
        "partition's devices model" in problems[0]
    # A name the table does not know says nothing against the config.
    assert device_check.device_problems(
        [gpu(0, name='NVIDIA L40S')], 'gpu', 1, 'p', 'H100-SXM') == []


def test_a_mig_slice_needs_its_own_peak():
    # A 1g.5gb slice of an A100 is named after it: the A100's peak would
    # be 7 times the slice's.
    mig = gpu(0, name='NVIDIA A100-SXM4-40GB MIG 1g.5gb')
    problems = device_check.device_problems([mig], 'gpu', 1, 'site:mig',
                                            'A100')
    assert problems == [
        "the GPU that ran is a MIG slice ('NVIDIA A100-SXM4-40GB MIG "
        "1g.5gb'), measured against the whole GPU's peak: set the "
        "slice's peak FLOP/s in extras['device_peak_flops'] of partition "
        "site:mig"]
    assert device_check.device_problems([mig], 'gpu', 1, 'site:mig', 'A100',
                                        peak_given=True) == []
    assert device_check.device_problems(
        [gpu(0, name='NVIDIA H100 80GB HBM3 MIG 3g.40gb')], 'gpu', 1, 'p',
        None)
    assert device_check.device_problems([gpu(0)], 'gpu', 1, 'p',
                                        'H100-SXM') == []


def test_summary_tf32_runtime():
    records = [gpu(r) for r in range(4)]
    assert device_check.device_summary(records) == \
        'gpu cuda NVIDIA H100 80GB HBM3 x4'
    assert device_check.device_summary([CPU_FALLBACK]) == 'cpu aarch64 x1'
    assert device_check.tf32(records) is True
    assert device_check.tf32(records[:3] + [gpu(3, tf32=False)]) is False
    assert device_check.tf32([]) is None
    assert device_check.loaded_nccl(records) == '2.27.3'
    assert device_check.loaded_nccl([CPU_FALLBACK]) == ''


def test_memory_and_data_share():
    assert device_check.gpu_memory_peak([]) is None      # CPUs: absent
    assert device_check.gpu_memory_peak([
        {'rank': 0, 'peak_allocated_MiB': 30000.0,
         'peak_reserved_MiB': 35000.0},
        {'rank': 1, 'peak_allocated_MiB': 31000.0,
         'peak_reserved_MiB': None}]) == 35000.0
    assert device_check.data_share([]) is None
    assert device_check.data_share([
        {'rank': 0, 'data_s': 1.0, 'compute_s': 9.0},
        {'rank': 1, 'data_s': 3.0, 'compute_s': 7.0}]) == 20.0
