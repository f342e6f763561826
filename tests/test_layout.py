import math

import pytest

from hpctestlib_ml.layout import (LayoutError, PartitionFacts, misfit,
                                  resolve_layout, runs_scale)

BOOSTER = PartitionFacts('juwels-booster:booster', max_nodes=936,
                         gpus_per_node=4, cpus_per_node=96, launcher='srun')
LOCAL = PartitionFacts('local:cpu', max_nodes=1, gpus_per_node=0,
                       cpus_per_node=2, launcher='local',
                       scales=('1_proc', '2_procs'))
CPU_CLUSTER = PartitionFacts('slurm:cpu', max_nodes=2, gpus_per_node=0,
                             cpus_per_node=2, launcher='srun')


@pytest.mark.parametrize('scale, nodes', [('1_node', 1), ('2_nodes', 2),
                                          ('4_nodes', 4), ('8_nodes', 8)])
def test_whole_gpu_nodes(scale, nodes):
    layout = resolve_layout(scale, BOOSTER)
    assert (layout.num_nodes, layout.procs_per_node, layout.gpus_per_node,
            layout.cpus_per_proc) == (nodes, 4, 4, 24)
    assert layout.world_size == 4 * nodes
    assert misfit(layout, BOOSTER, 'per_task') is None


def test_sub_node_gpu_scale_and_overrides():
    assert resolve_layout('1_proc', BOOSTER).gpus_per_node == 1
    layout = resolve_layout('1_node', BOOSTER, num_nodes=3, procs_per_node=2)
    assert (layout.num_nodes, layout.procs_per_node, layout.cpus_per_proc) \
        == (3, 2, 48)


def test_local_cpu_runs_only_its_scales():
    assert runs_scale('1_proc', LOCAL, 'per_task')
    assert runs_scale('1_proc', LOCAL, 'torchrun')
    assert runs_scale('2_procs', LOCAL, 'torchrun')
    # The local launcher starts one task: 2 ranks need torchrun.
    assert not runs_scale('2_procs', LOCAL, 'per_task')
    assert not runs_scale('2_nodes', LOCAL, 'torchrun')


def test_cpu_cluster_skips_whole_node_duplicate():
    assert not runs_scale('1_node', CPU_CLUSTER, 'per_task')
    assert runs_scale('2_nodes', CPU_CLUSTER, 'per_task')
    assert not runs_scale('4_nodes', CPU_CLUSTER, 'per_task')


@pytest.mark.parametrize('gpus, expected', [
    (1, ['1_proc', '2_nodes']),
    (2, ['1_proc', '2_procs', '2_nodes']),
])
def test_gpu_partition_skips_whole_node_duplicate(gpus, expected):
    '''On a 1-GPU node 1_node is 1 x 1, as 1_proc; on a 2-GPU node 1 x 2,
    as 2_procs: each case runs once, at the per-process scale.'''
    part = PartitionFacts('site:gpu', max_nodes=2, gpus_per_node=gpus,
                          cpus_per_node=16)
    for mode in ('per_task', 'torchrun'):
        assert [s for s in ('1_proc', '2_procs', '1_node', '2_nodes')
                if runs_scale(s, part, mode)] == expected, mode


def test_whole_node_kept_where_its_per_process_twin_does_not_run():
    # The site lists 1_node only: it runs, 1 x 1.
    part = PartitionFacts('site:gpu', max_nodes=2, gpus_per_node=1,
                          scales=('1_node', '2_nodes'))
    assert runs_scale('1_node', part, 'per_task')
    assert not runs_scale('1_proc', part, 'per_task')
    # Four GPUs: 1_node is 1 x 4, no per-process scale's layout.
    assert runs_scale('1_node', BOOSTER, 'per_task')
    assert runs_scale('1_proc', BOOSTER, 'per_task')
    assert runs_scale('2_procs', BOOSTER, 'per_task')


def test_unlimited_partition():
    part = PartitionFacts('x:y', max_nodes=math.inf, gpus_per_node=8)
    assert runs_scale('16_nodes', part, 'torchrun')


@pytest.mark.parametrize('kwargs, message', [
    ({'num_nodes': 0}, 'num_nodes must be a positive integer'),
    ({'num_nodes': -3}, 'num_nodes must be a positive integer'),
    ({'procs_per_node': 0}, 'procs_per_node must be a positive integer'),
])
def test_bad_counts(kwargs, message):
    with pytest.raises(LayoutError, match=message):
        resolve_layout('1_node', BOOSTER, **kwargs)


def test_unknown_scale():
    with pytest.raises(LayoutError, match="unknown scale 'huge'"):
        resolve_layout('huge', BOOSTER)


def test_misfits_name_the_fix():
    assert 'allows 1 (extras max_nodes' in misfit(
        resolve_layout('4_nodes', LOCAL), LOCAL, 'torchrun')
    assert 'has 4 GPUs per node' in misfit(
        resolve_layout('1_node', BOOSTER, procs_per_node=8), BOOSTER,
        'per_task')
    assert 'use launch_mode torchrun' in misfit(
        resolve_layout('2_procs', LOCAL), LOCAL, 'per_task')
    assert 'unknown launch mode' in misfit(
        resolve_layout('1_proc', LOCAL), LOCAL, 'mpirun')
