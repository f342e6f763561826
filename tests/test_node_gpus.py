"""Which of a node's GPUs a case's energy counts (src/node_gpus.py), from
the environments tasks get on GPU nodes: a 4-GPU node with one GPU bound
per task, the same node unbound, a 1-GPU case on an 8-GPU box under the
local scheduler, and AMD's two visibility variables."""
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / 'src'))
import node_gpus  # noqa: E402
from node_gpus import Counted, counted_gpus  # noqa: E402

ALL4 = ('0', '1', '2', '3')


@pytest.mark.parametrize('task', range(4))
def test_bound_tasks_each_count_the_nodes_four_gpus(task):
    # srun --gpus-per-task=1 (or --gpu-bind): each task sees one GPU, the
    # step has four on the node.
    env = {'SLURM_STEP_GPUS': '0,1,2,3', 'SLURM_JOB_GPUS': '0,1,2,3',
           'CUDA_VISIBLE_DEVICES': str(task), 'SLURM_LOCALID': str(task),
           'HPCML_GPUS_PER_NODE': '4'}
    assert counted_gpus(env) == Counted(ALL4, 'slurm',
                                        'SLURM_STEP_GPUS=0,1,2,3')


def test_unbound_tasks_count_the_steps_gpus():
    env = {'SLURM_STEP_GPUS': '0,1,2,3', 'CUDA_VISIBLE_DEVICES': '0,1,2,3',
           'HPCML_GPUS_PER_NODE': '4'}
    assert counted_gpus(env).ids == ALL4


def test_the_job_s_gpus_where_the_step_has_none_listed():
    # The batch step (and older Slurm) set SLURM_JOB_GPUS only; Slurm's
    # ids are global: GPUs 4-7 of an 8-GPU node shared with another job.
    env = {'SLURM_JOB_GPUS': '4,5,6,7', 'CUDA_VISIBLE_DEVICES': '0,1,2,3'}
    assert counted_gpus(env) == Counted(('4', '5', '6', '7'), 'slurm',
                                        'SLURM_JOB_GPUS=4,5,6,7')


def test_local_scheduler_one_gpu_case_on_an_eight_gpu_box():
    assert counted_gpus({'HPCML_GPUS_PER_NODE': '1'}) == Counted(
        ('0',), 'first', 'HPCML_GPUS_PER_NODE=1')
    # A user's CUDA_VISIBLE_DEVICES picks which: the case uses its first.
    env = {'HPCML_GPUS_PER_NODE': '1', 'CUDA_VISIBLE_DEVICES': '6,7'}
    assert counted_gpus(env).ids == ('6',)
    assert counted_gpus(env).match == 'visible'


def test_without_any_hint_every_gpu_counts():
    assert counted_gpus({}) == Counted(None, 'all', "all of the node's GPUs")


def test_a_cpu_case_counts_no_gpu():
    assert counted_gpus({'HPCML_GPUS_PER_NODE': '0'}).ids == ()
    assert counted_gpus({'HPCML_GPUS_PER_NODE': '0',
                         'SLURM_JOB_GPUS': '0,1'}).ids == ()


def test_visibility_reads_like_the_runtime():
    uuid = 'GPU-8f6c2a1e-4b1d-11ee-9f9d-0242ac120002'
    assert counted_gpus({'CUDA_VISIBLE_DEVICES': f'{uuid},1'}).ids == (
        uuid, '1')
    # CUDA stops at the first id it cannot read; '' hides every device.
    assert counted_gpus({'CUDA_VISIBLE_DEVICES': '2,-1,3'}).ids == ('2',)
    assert counted_gpus({'CUDA_VISIBLE_DEVICES': ''}).ids == ()
    assert counted_gpus({'CUDA_VISIBLE_DEVICES': 'NoDevFiles'}).ids == ()


def test_amd_visibility_rocr_then_hip():
    # MI250: 8 GCDs. ROCr selects physical devices, HIP indexes within them.
    env = {'ROCR_VISIBLE_DEVICES': '4,5,6,7', 'HIP_VISIBLE_DEVICES': '1,2'}
    assert counted_gpus(env, 'amd') == Counted(
        ('5', '6'), 'visible',
        'ROCR_VISIBLE_DEVICES=4,5,6,7 HIP_VISIBLE_DEVICES=1,2')
    assert counted_gpus({'ROCR_VISIBLE_DEVICES': '3'}, 'amd').ids == ('3',)
    # HIP reads CUDA_VISIBLE_DEVICES too; NVIDIA ignores ROCr's variable.
    assert counted_gpus({'CUDA_VISIBLE_DEVICES': '2'}, 'amd').ids == ('2',)
    assert counted_gpus({'ROCR_VISIBLE_DEVICES': '3'}).ids is None
    # Bound per task on an 8-GCD node: Slurm's list still wins.
    env = {'SLURM_STEP_GPUS': '0,1,2,3,4,5,6,7', 'ROCR_VISIBLE_DEVICES': '0'}
    assert len(counted_gpus(env, 'amd').ids) == 8


def test_slurm_ranges_and_the_case_s_share():
    env = {'SLURM_STEP_GPUS': '0-3', 'HPCML_GPUS_PER_NODE': '2'}
    assert counted_gpus(env) == Counted(
        ('0', '1'), 'slurm',
        'SLURM_STEP_GPUS=0-3, first 2 (HPCML_GPUS_PER_NODE)')


@pytest.mark.parametrize('env, message', [
    ({'SLURM_STEP_GPUS': 'gpu:a100:4'}, 'SLURM_STEP_GPUS.*comma list'),
    ({'HPCML_GPUS_PER_NODE': 'four'}, 'HPCML_GPUS_PER_NODE.*integer'),
])
def test_bad_values_name_the_variable(env, message):
    with pytest.raises(node_gpus.NodeGpusError, match=message):
        counted_gpus(env)
