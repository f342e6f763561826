"""The Collectives component: nccl-tests' definitions (bus-bandwidth
factors, counts, algbw = S/t) against nccl-tests' own table and real
published nccl-tests logs (tests/data/SOURCES.md), the parser on those logs
and on the suite's program run on this CPU with 1 and 2 ranks (Gloo),
and ``hpcml extract collectives``."""
import subprocess
import sys

import pytest

from conftest import BIN, REPO, read_data, run_module
from hpctestlib_ml.parsers import nccl_tests as parser

sys.path.insert(0, str(REPO / 'src'))
import collectives as coll  # noqa: E402

approx = pytest.approx

LOGS = {
    'superbench_a100x8_nccl_allreduce.log': 'all_reduce',
    'superbench_a100x8_nccl_allgather.log': 'all_gather',
    'superbench_a100x8_nccl_reducescatter.log': 'reduce_scatter',
    'a3mega_h100_2x8_all_reduce.log': 'all_reduce',
}


def public(name):
    return parser.training_log(read_data('components', name))


@pytest.mark.parametrize('n, expected', [
    # nccl-tests doc/PERFORMANCE.md, "Summary": all-reduce 2(n-1)/n,
    # reduce-scatter and all-gather (n-1)/n, broadcast and reduce 1.
    (2, {'all_reduce': 1.0, 'all_gather': 0.5, 'reduce_scatter': 0.5,
         'broadcast': 1.0, 'reduce': 1.0, 'alltoall': 0.5}),
    (8, {'all_reduce': 1.75, 'all_gather': 0.875, 'reduce_scatter': 0.875,
         'broadcast': 1.0, 'reduce': 1.0, 'alltoall': 0.875}),
    (16, {'all_reduce': 1.875, 'all_gather': 0.9375,
          'reduce_scatter': 0.9375}),
    # One rank moves nothing: its bus bandwidth is 0.
    (1, {'all_reduce': 0.0, 'all_gather': 0.0, 'reduce_scatter': 0.0}),
])
def test_bus_factors_are_nccl_tests(n, expected):
    for op, factor in expected.items():
        assert coll.BUS_FACTOR[op](n) == factor, op


@pytest.mark.parametrize('name', sorted(LOGS))
def test_published_rows_follow_the_definitions(name):
    '''Every row of a real log whose figures are large enough to read at
    the printed 2 decimals: algbw = S/t (S in bytes, t in us, GB/s of 1e9
    bytes) and busbw = algbw x the operation's factor of the log's ranks
    (8 A100s; 16 H100s on 2 nodes).'''
    log = public(name)
    op = LOGS[name]
    rows = log.figures['results'][op]
    checked = 0
    for row in rows:
        for placement in ('out-of-place', 'in-place'):
            got = row[placement]
            if got['algbw_GBps'] < 10:
                continue
            algbw, busbw = coll.bandwidths(op, row['size'],
                                           got['time_us'] * 1e-6,
                                           log.world_size)
            assert got['algbw_GBps'] == approx(algbw, rel=2e-3, abs=0.006)
            # Both printed to 0.005: busbw's error, and algbw's x factor.
            factor = coll.BUS_FACTOR[op](log.world_size)
            assert got['busbw_GBps'] == approx(got['algbw_GBps'] * factor,
                                               abs=0.0051 * (1 + factor))
            checked += 1
    assert checked >= 10


@pytest.mark.parametrize('name', sorted(LOGS))
def test_counts_are_nccl_tests(name):
    '''The count column of a real log's large sizes is nccl-tests'
    arithmetic: all-reduce the buffer's elements, all-gather and
    reduce-scatter each rank's share. (At sizes below 16 bytes a rank,
    current nccl-tests rounds each share down to 16 bytes; SuperBench's
    older build did not: its 32-byte all-gather shows 1 element a rank.)'''
    log = public(name)
    op = LOGS[name]
    for row in log.figures['results'][op]:
        if row['size'] >= 1024:
            count, send, recv = coll.counts(op, row['size'], 4,
                                            log.world_size)
            assert row['count'] == count
            assert max(send, recv) * 4 == row['size']


# What each log gives (as printed): the largest size's out-of-place bus
# and algorithm bandwidth and time, the smallest nonzero size's time, the
# printed average, the ranks and iterations of its header.
@pytest.mark.parametrize('name, expected', [
    # 8 x A100-SXM4-40GB, one process (-g 8), 1 B to 8 GiB.
    ('superbench_a100x8_nccl_allreduce.log', dict(
        world_size=8, steps=20, allreduce_busbw_GBps=235.26,
        allreduce_algbw_GBps=134.44, allreduce_time_us=63896.0,
        allreduce_size_bytes=8589934592, allreduce_latency_us=34.73,
        allreduce_latency_size_bytes=4, allreduce_avg_busbw_GBps=68.4048,
        allreduce_wrong=0, warmup_iters=5)),
    # No redop column (nccl-tests before 2.10): all-gather by its count.
    ('superbench_a100x8_nccl_allgather.log', dict(
        world_size=8, allgather_busbw_GBps=223.39,
        allgather_algbw_GBps=255.31, allgather_latency_us=35.03,
        allgather_latency_size_bytes=32, allgather_avg_busbw_GBps=58.2651)),
    ('superbench_a100x8_nccl_reducescatter.log', dict(
        world_size=8, reducescatter_busbw_GBps=231.52,
        reducescatter_algbw_GBps=264.6, reducescatter_time_us=32464.0,
        reducescatter_avg_busbw_GBps=60.168)),
    # 2 nodes x 8 H100 80GB HBM3 (Google A3 Mega), MPI, with the root
    # column and #wrong of current nccl-tests.
    ('a3mega_h100_2x8_all_reduce.log', dict(
        world_size=16, steps=20, allreduce_busbw_GBps=338.82,
        allreduce_algbw_GBps=180.71, allreduce_latency_us=135.8,
        allreduce_latency_size_bytes=8, allreduce_avg_busbw_GBps=70.742,
        allreduce_wrong=0)),
])
def test_published_logs(name, expected):
    log = public(name)
    got = {**log.figures, 'world_size': log.world_size, 'steps': log.steps}
    for key, value in expected.items():
        assert got[key] == value, key
    assert log.figures['operations'] == [LOGS[name]]
    assert log.ranks == frozenset(range(log.world_size))


def test_hpcml_extract_reads_nccl_tests_logs():
    path = REPO / 'tests/data/components/a3mega_h100_2x8_all_reduce.log'
    proc = subprocess.run([BIN / 'hpcml', 'extract', 'collectives', path],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert '"allreduce_busbw_GBps": 338.82' in proc.stdout


def test_a_table_naming_its_operation_and_a_launcher_prefix():
    text = ('[1,0]<stdout>:# Collective test starting: all_gather_perf\n'
            '[1,0]<stdout>:#  Rank  0 Group  0 Pid 1 on a device  0 [x] G\n'
            '[1,0]<stdout>:#  Rank  1 Group  0 Pid 2 on b device  0 [x] G\n'
            '[1,0]<stdout>:#       size         count      type   redop    '
            'root     time   algbw   busbw #wrong\n'
            '[1,0]<stdout>:     1048576        131072     float    none      '
            '-1   100.00   10.49    5.24      0\n')
    log = parser.training_log(text)
    assert log.figures['operations'] == ['all_gather']
    assert log.figures['allgather_busbw_GBps'] == 5.24
    assert log.world_size == 2


def check_own_log(text, world):
    '''The program's log at 1 KiB to 64 KiB, 3 iterations: every
    operation, every size, no wrong element, the definitions.'''
    log = parser.training_log(text)
    assert log.world_size == world and log.steps == 3
    assert log.figures['operations'] == list(coll.OPS)
    for op, name in parser.SHORT.items():
        rows = log.figures['results'][op]
        assert [r['size'] for r in rows] == coll.sizes(1024, 65536)
        assert log.figures[f'{name}_wrong'] == 0
        assert log.figures[f'{name}_latency_size_bytes'] == 1024
        got = rows[-1][coll.PLACEMENT[op]]
        assert got['busbw_GBps'] == approx(
            got['algbw_GBps'] * coll.BUS_FACTOR[op](world), rel=1e-4)
        assert got['algbw_GBps'] == approx(
            65536 / 1e9 / (got['time_us'] * 1e-6), rel=1e-4)
        assert rows[-1]['max_time_us'] >= got['time_us'] * 0.9999
    start, stop = log.timed_window
    assert 0 < stop - start < 600
    return log


def test_one_rank(tmp_path):
    proc = run_module(tmp_path, 'collectives', '--cpu', '-b', '1K', '-e',
                      '64K', '-n', '3', '-w', '1')
    log = check_own_log(proc.stdout, 1)
    assert log.figures['allreduce_busbw_GBps'] == 0


def test_two_ranks_under_torchrun(tmp_path):
    proc = run_module(tmp_path, 'collectives', '--cpu', '-b', '1K', '-e',
                      '64K', '-n', '3', '-w', '1', procs=2)
    log = check_own_log(proc.stdout, 2)
    assert log.figures['allreduce_busbw_GBps'] > 0
    assert proc.stdout.count('# Collective test starting:') == 3


def test_sizes_and_their_units():
    assert coll.parse_size('1K') == 1024 and coll.parse_size('1G') == 2**30
    assert coll.parse_size('4096') == 4096
    sizes = coll.sizes(coll.parse_size('1K'), coll.parse_size('1G'))
    assert len(sizes) == 21 and sizes[-1] == 2 ** 30
    # nccl-tests' cells: 2 decimals, fewer where the width is too small.
    assert coll.float_cell(35.92, 7) == '  35.92'
    assert coll.float_cell(63896.0, 7) == '63896.0'
    assert coll.float_cell(1234567.0, 7) == '1234567'


def test_history_references_know_which_way_is_better():
    '''Bus bandwidth is a rate (higher is better), latency a time.'''
    from hpctestlib_ml.history_refs.derive import metric_direction
    assert metric_direction('allreduce_busbw_GBps', 'GB/s',
                            'collectives') == +1
    assert metric_direction('allreduce_latency_us', 'us',
                            'collectives') == -1


WRONG_DRIVER = '''
import torch, torch.distributed as dist
import collectives.__main__ as program
dist.init_process_group('gloo', rank=0, world_size=1, store=dist.HashStore())
out, inp = torch.zeros(64), torch.zeros(64)
print('right', program.wrong_elements('all_reduce', out, inp, 0, 1))
program.run_op = lambda op, out, inp: out[:5].fill_(7)
print('wrong', program.wrong_elements('all_reduce', out, inp, 0, 1))
# A Gloo group left open at exit can end the process in std::terminate
# (seen once in CI, exit -6 after both lines): close it as the program does.
dist.destroy_process_group()
'''


def test_wrong_elements_are_counted(tmp_path):
    '''The #wrong column counts the elements off the expected result
    (here an operation that corrupts 5 of them).'''
    proc = run_module(tmp_path, ['-c', WRONG_DRIVER])
    assert 'right 0' in proc.stdout and 'wrong 5' in proc.stdout


def test_wrong_elements_are_a_communication_failure():
    from hpctestlib_ml import triage
    assert triage.problems_category(['all_reduce: 5 wrong elements']) == \
        'communication'
