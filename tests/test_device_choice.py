"""Each rank's device, from what a GPU node gives it (src/device_choice.py).

The inputs are those of real nodes: Slurm's default (every task sees the
node's 4 GPUs), Slurm binding one GPU to each task (--gpus-per-task=1,
--gpu-bind: CUDA_VISIBLE_DEVICES holds one id, different per task), AMD's
HIP/ROCR variables, torchrun (LOCAL_WORLD_SIZE).
"""
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / 'src'))
import device_choice  # noqa: E402


@pytest.mark.parametrize('local_rank', range(4))
def test_a_gpu_bound_to_each_task_is_ordinal_0(local_rank):
    # Slurm --gpus-per-task=1: task r sees one GPU, whose id is r; the
    # step's GPUs on the node are all four.
    env = {'CUDA_VISIBLE_DEVICES': str(local_rank), 'SLURM_LOCALID':
           str(local_rank), 'SLURM_STEP_TASKS_PER_NODE': '4(x2)',
           'SLURM_STEP_GPUS': '0,1,2,3'}
    assert device_choice.may_be_bound(env)
    assert device_choice.device_index(
        local_rank, 1, device_choice.local_world_size(env),
        device_choice.visibility(env),
        device_choice.may_be_bound(env)) == 0


@pytest.mark.parametrize('local_rank', range(4))
def test_a_gpu_bound_to_each_rank_of_a_per_task_job_is_ordinal_0(local_rank):
    '''A per_task job exports LOCAL_WORLD_SIZE for its ranks (the suite's
    job script does, launching.set_device_env), and a site binds a GPU to
    each task (extras['rank_binding'] = ['--gpus-per-task=1']): task r
    sees one GPU, its own. Taken for torchrun's ranks before, and
    refused: "local rank 1 sees 1 device ... and so do the other 3".'''
    env = {'CUDA_VISIBLE_DEVICES': str(local_rank), 'SLURM_LOCALID':
           str(local_rank), 'LOCAL_WORLD_SIZE': '4',
           'SLURM_STEP_TASKS_PER_NODE': '4(x2)', 'SLURM_STEP_GPUS': '0,1,2,3'}
    assert device_choice.may_be_bound(env)
    assert device_choice.device_index(
        local_rank, 1, device_choice.local_world_size(env),
        device_choice.visibility(env),
        device_choice.may_be_bound(env)) == 0


@pytest.mark.parametrize('env', [
    # The user exported CUDA_VISIBLE_DEVICES=0; the local scheduler's
    # 4-rank case runs torchrun, whose ranks all inherit it.
    {'CUDA_VISIBLE_DEVICES': '0', 'LOCAL_WORLD_SIZE': '4',
     'TORCHELASTIC_RUN_ID': '17'},
    # torchrun under Slurm with one GPU bound to its one task per node.
    {'CUDA_VISIBLE_DEVICES': '0', 'LOCAL_WORLD_SIZE': '4',
     'TORCHELASTIC_RUN_ID': '17', 'SLURM_STEP_GPUS': '0'},
    # One task per rank, but Slurm gave the job no GPUs: nothing bound.
    {'CUDA_VISIBLE_DEVICES': '0', 'SLURM_NTASKS_PER_NODE': '4'},
])
def test_ranks_sharing_one_unbound_device_are_refused(env):
    assert not device_choice.may_be_bound(env)
    with pytest.raises(device_choice.DeviceChoiceError,
                       match=r'local rank 1 sees 1 device '
                             r'\(CUDA_VISIBLE_DEVICES=0\) and so do the '
                             r'other 3 ranks.*list 4 devices'):
        device_choice.device_index(
            1, 1, device_choice.local_world_size(env),
            device_choice.visibility(env), device_choice.may_be_bound(env))
    # One rank on the node: its one device is its own.
    assert device_choice.device_index(0, 1, 1, '', False) == 0


@pytest.mark.parametrize('local_rank', range(4))
def test_every_gpu_visible_is_the_local_rank(local_rank):
    env = {'CUDA_VISIBLE_DEVICES': '0,1,2,3', 'LOCAL_WORLD_SIZE': '4'}
    assert device_choice.device_index(
        local_rank, 4, device_choice.local_world_size(env)) == local_rank


def test_eight_gcds_of_an_mi250_node_with_rocr_visibility():
    env = {'ROCR_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7',
           'SLURM_NTASKS_PER_NODE': '8'}
    assert device_choice.visibility(env) == \
        'ROCR_VISIBLE_DEVICES=0,1,2,3,4,5,6,7'
    assert [device_choice.device_index(r, 8, 8) for r in range(8)] == \
        list(range(8))


def test_two_ranks_on_one_device_is_refused_with_what_the_rank_saw():
    # 4 ranks, each seeing 2 GPUs (--gpus-per-task=2): ranks would share.
    env = {'CUDA_VISIBLE_DEVICES': '2,3', 'LOCAL_WORLD_SIZE': '4'}
    with pytest.raises(device_choice.DeviceChoiceError,
                       match=r'local rank 3 sees 2 devices '
                             r'\(CUDA_VISIBLE_DEVICES=2,3\).*4 ranks'):
        device_choice.device_index(3, 2, 4, device_choice.visibility(env))


def test_no_device_visible():
    with pytest.raises(device_choice.DeviceChoiceError, match='no device'):
        device_choice.device_index(0, 0, None, 'CUDA_VISIBLE_DEVICES=')


@pytest.mark.parametrize('env, expected', [
    ({'LOCAL_WORLD_SIZE': '4'}, 4),
    ({'SLURM_NTASKS_PER_NODE': '4'}, 4),
    ({'SLURM_STEP_TASKS_PER_NODE': '4(x16)'}, 4),
    ({'SLURM_STEP_TASKS_PER_NODE': '3,2'}, 3),
    ({}, None),
])
def test_local_world_size(env, expected):
    assert device_choice.local_world_size(env) == expected


@pytest.mark.parametrize('backend, capability, allowed, env, expected', [
    ('cuda', (8, 0), True, {}, True),                  # A100
    ('cuda', (9, 0), True, {}, True),                  # H100, GH200
    ('cuda', (9, 0), False, {}, False),                # PyTorch's default
    ('cuda', (9, 0), True, {'NVIDIA_TF32_OVERRIDE': '0'}, False),
    ('cuda', (7, 0), True, {}, False),                 # V100: no TF32
    ('hip', (9, 0), True, {}, False),                  # MI250: fp32 MFMA
])
def test_tf32_active(backend, capability, allowed, env, expected):
    assert device_choice.tf32_active(backend, capability, allowed,
                                     env) is expected


@pytest.mark.parametrize('backend, capability, expected', [
    ('cuda', (7, 0), False), ('cuda', (8, 0), True), ('cuda', (9, 0), True),
    ('hip', (9, 0), True)])
def test_bf16_native(backend, capability, expected):
    assert device_choice.bf16_native(backend, capability) is expected


def test_a_gpu_rank_sets_tf32_and_cudnn_autotuning_and_says_so(monkeypatch):
    '''torch_device.set_math_mode on an H100 rank (its capability given,
    no GPU here): TF32 for matrix products and convolutions and cuDNN's
    autotuning on (review findings 9 and 17), and the device record's
    tf32 True; NVIDIA_TF32_OVERRIDE=0 makes it False.'''
    import torch
    import torch_device
    monkeypatch.setattr(torch_device, 'capability', lambda device: (9, 0))
    monkeypatch.delenv('NVIDIA_TF32_OVERRIDE', raising=False)
    flags = (torch.backends.cuda.matmul.allow_tf32,
             torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    try:
        torch.backends.cuda.matmul.allow_tf32 = False   # PyTorch's default
        torch.backends.cudnn.benchmark = False
        assert torch_device.set_math_mode(torch.device('cuda', 0)) is True
        assert torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32
        assert torch.backends.cudnn.benchmark
        monkeypatch.setenv('NVIDIA_TF32_OVERRIDE', '0')
        assert torch_device.tf32_active(torch.device('cuda', 0)) is False
        assert torch_device.set_math_mode(torch.device('cpu')) is False
    finally:
        (torch.backends.cuda.matmul.allow_tf32,
         torch.backends.cudnn.allow_tf32,
         torch.backends.cudnn.benchmark) = flags


def test_the_collective_timeout_is_the_jobs_variable_or_torchs_default():
    '''HPCML_COLLECTIVE_TIMEOUT_S: seconds a rank waits for a stalled peer;
    unset or empty keeps torch's defaults; anything else stops the program
    with the fix.'''
    import datetime
    import torch_device
    timeout = torch_device.collective_timeout
    assert timeout({}) is None
    assert timeout({'HPCML_COLLECTIVE_TIMEOUT_S': ' '}) is None
    assert timeout({'HPCML_COLLECTIVE_TIMEOUT_S': '20'}) == \
        datetime.timedelta(seconds=20)
    assert timeout({'HPCML_COLLECTIVE_TIMEOUT_S': '1.5'}) == \
        datetime.timedelta(seconds=1.5)
    for bad in ('0', '-3', 'ten', 'nan'):
        with pytest.raises(SystemExit) as stopped:
            timeout({'HPCML_COLLECTIVE_TIMEOUT_S': bad})
        assert str(stopped.value).startswith(
            'hpcml: error: HPCML_COLLECTIVE_TIMEOUT_S must be a number of '
            f"seconds > 0, got '{bad}'"), stopped.value


def test_a_torchrun_rank_on_a_box_with_one_visible_gpu_is_refused(
        monkeypatch):
    '''torch_device.select_device where the user exported
    CUDA_VISIBLE_DEVICES=0 and the local scheduler's torchrun started 4
    ranks (torch here reports one GPU): ordinal 0 for every rank was the
    answer before; now the error, before any device is touched.'''
    import torch
    import torch_device
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)
    monkeypatch.setattr(torch.cuda, 'set_device', lambda index: None)
    env = {'CUDA_VISIBLE_DEVICES': '0', 'LOCAL_WORLD_SIZE': '4',
           'LOCAL_RANK': '2'}
    with pytest.raises(device_choice.DeviceChoiceError,
                       match='list 4 devices'):
        torch_device.select_device(env)
    bound = {'CUDA_VISIBLE_DEVICES': '2', 'SLURM_NTASKS_PER_NODE': '4',
             'LOCAL_RANK': '2', 'SLURM_STEP_GPUS': '0,1,2,3'}
    assert torch_device.select_device(bound) == torch.device('cuda', 0)
