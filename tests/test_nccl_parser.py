"""NCCL's version and chosen transport from its INFO log
(hpctestlib_ml/parsers/nccl.py), on excerpts of real logs from public
issues (tests/data/nccl/SOURCES.md names each one's issue)."""
import pytest

from conftest import read_data
from hpctestlib_ml.parsers import nccl


def log(name):
    return read_data('nccl', name)


@pytest.mark.parametrize('name, facts', [
    # InfiniBand, NCCL's own IB verbs transport.
    ('ib_nccl-tests_182.log', {'nccl_version': '2.19.3', 'nccl_net': 'IB'}),
    # RoCE goes through the same transport ("NET/IB ... /RoCE").
    ('roce_nccl-tests_185.log', {'nccl_version': '2.19.3', 'nccl_net': 'IB'}),
    # HPC-X's RDMA/SHARP plugin: IB too.
    ('ibext_sharp_nccl_1357.log', {'nccl_net': 'IB'}),
    ('ibext_host_labelled_nccl_1029.log', {'nccl_net': 'IB'}),
    ('ib_rank_prefixed_nccl_302.log', {'nccl_net': 'IB'}),
    # The silent fallbacks: IB disabled, no verbs library.
    ('socket_ib_disabled_nccl-tests_188.log', {'nccl_net': 'Socket'}),
    ('socket_no_verbs_nccl-tests_166.log',
     {'nccl_version': '2.18.3', 'nccl_net': 'Socket'}),
    ('socket_torchrun_ranks_vlmevalkit_975.log', {'nccl_net': 'Socket'}),
    # The libfabric plugin on EFA and on Slingshot (cxi).
    ('ofi_efa_aws-ofi-nccl_161.log',
     {'nccl_version': '2.10.3', 'nccl_net': 'OFI/efa'}),
    ('ofi_cxi_slingshot_aws-ofi-nccl_801.log', {'nccl_net': 'OFI/cxi'}),
    # NCCL 2.4, before "Using network": the NET/IB line decides.
    ('ib_nccl2.4.7_nv_peer_memory_56.log',
     {'nccl_version': '2.4.7', 'nccl_net': 'IB'}),
    ('socket_no_ib_nccl2.4.7_nccl_226.log',
     {'nccl_version': '2.4.7', 'nccl_net': 'Socket'}),
])
def test_version_and_transport_of_public_logs(name, facts):
    assert nccl.nccl_facts(log(name)) == facts


def test_each_process_and_its_rank():
    found = nccl.processes(log('socket_no_verbs_nccl-tests_166.log'))
    assert found == {'ubuntu:39964': {'net': 'Socket', 'rank': None},
                     'ubuntu:9621': {'net': 'Socket', 'rank': None}}
    # Lines that lost their host:pid prefix are one process, '?'; its rank
    # is its rank in the largest communicator it initialised.
    assert nccl.processes(log('ofi_cxi_slingshot_aws-ofi-nccl_801.log')) == {
        '?': {'net': 'OFI/cxi', 'rank': 0}}
    # NCCL 2.4: the processes whose excerpt stops before their NET/IB line
    # (bootstrap's NET/Socket line only) are not guessed.
    assert list(nccl.processes(
        log('ib_nccl2.4.7_nv_peer_memory_56.log'))) == ['master_node:20']


def test_nodes_on_different_transports_are_both_named():
    # One job, one node on IB and one on sockets: what a node without the
    # verbs library in its image does.
    text = log('roce_nccl-tests_185.log') + log(
        'socket_no_verbs_nccl-tests_166.log')
    assert nccl.nccl_facts(text) == {'nccl_version': '2.18.3,2.19.3',
                                     'nccl_net': 'IB+Socket'}


def test_a_log_without_nccl_info_gives_nothing():
    assert nccl.nccl_facts('Epoch 1 loss 2.3\n[hpcml] timing {}\n') == {}
    # torch's own error names the version it loaded (NVIDIA/nccl#1231).
    assert nccl.nccl_version(
        'ProcessGroupNCCL.cpp:1691, unhandled cuda error (run with '
        'NCCL_DEBUG=INFO for details), NCCL version 2.19.3') == '2.19.3'
