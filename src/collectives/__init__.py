"""Collective operations through ``torch.distributed`` as nccl-tests
measures them (``python -m collectives``, :mod:`.__main__`; the
``Collectives`` component check): all-reduce, all-gather and
reduce-scatter over message sizes from 1 KiB to 1 GiB, with nccl-tests'
algorithm and bus bandwidth, in nccl-tests' own output format, so that one
parser (``hpctestlib_ml/parsers/nccl_tests.py``) reads this program's log
and nccl-tests' alike.

The definitions, from NVIDIA/nccl-tests (a0b82b22, 2.19.6)
``doc/PERFORMANCE.md`` and ``src/{all_reduce,all_gather,reduce_scatter,
common}.cu``:

- time: the mean time of one operation, ``-n`` iterations issued back to
  back after one untimed operation and a barrier, the clock stopped when
  the stream has drained (``BenchTime``), each rank's time then averaged
  over the ranks (``-a 1``, the default; ``-a 3`` would take the max);
  ``-w`` warm-up operations of every size run first (``TimeTest``);
- ``algbw = S / t`` in GB/s (1e9 bytes), where S is the size in bytes of
  the whole array: for all-reduce each rank's buffer (``count x
  sizeof(type)``), for all-gather and reduce-scatter the gathered (resp.
  scattered) array, ``count per rank x sizeof(type) x n``
  (``AllGatherGetBw``: ``count * typesize * nranks``);
- ``busbw = algbw x factor``: all-reduce ``2(n-1)/n``, reduce-scatter and
  all-gather ``(n-1)/n`` (:data:`BUS_FACTOR`; broadcast and reduce 1,
  all-to-all ``(n-1)/n``): the rate each rank's link moves data at,
  comparable with the hardware's link bandwidth whatever n;
- sizes: ``-b`` to ``-e``, multiplied by ``-f`` (1K to 1G by 2 here, as
  ``-b 1K -e 1G -f 2``); all-gather and reduce-scatter round each rank's
  count down to 16 bytes (``(count/nranks) & ~(16/eltSize-1)``), and the
  size column is the whole array's (``max(sendBytes, expectedBytes)``);
- ``# Avg bus bandwidth``: the mean busbw over every size (and both
  placements in nccl-tests).

PyTorch programs of the same kind, whose timing this follows where they
agree with nccl-tests: stas00/ml-engineering
``network/benchmarks/all_reduce_bench.py`` and EleutherAI's cookbook
``benchmarks/communication`` (warm-up, then iterations back to back
between two synchronisations, ``busbw`` by nccl-tests' factors).

Pure functions only here (no torch): the program and the tests use them.
"""

#: nccl-tests' bus-bandwidth factor of each operation, of n ranks
#: (``doc/PERFORMANCE.md``, "Summary").
BUS_FACTOR = {
    'all_reduce': lambda n: 2 * (n - 1) / n,
    'reduce_scatter': lambda n: (n - 1) / n,
    'all_gather': lambda n: (n - 1) / n,
    'broadcast': lambda n: 1.0,
    'reduce': lambda n: 1.0,
    'alltoall': lambda n: (n - 1) / n,
}

#: The operations the program runs, in its order.
OPS = ('all_reduce', 'all_gather', 'reduce_scatter')

#: Where each operation's result lands (``torch.distributed`` has no
#: out-of-place all-reduce, nor in-place all-gather and reduce-scatter
#: into one tensor): the group nccl-tests' table shows it under.
PLACEMENT = {'all_reduce': 'in-place', 'all_gather': 'out-of-place',
             'reduce_scatter': 'out-of-place'}

_UNITS = {'K': 2 ** 10, 'M': 2 ** 20, 'G': 2 ** 30, 'T': 2 ** 40}


def parse_size(text):
    '''Bytes of a size as nccl-tests' ``-b``/``-e`` take it: ``1K``,
    ``32M``, ``1G`` (powers of 1024) or plain bytes.'''
    text = str(text).strip()
    if text and text[-1].upper() in _UNITS:
        return int(float(text[:-1]) * _UNITS[text[-1].upper()])
    return int(text)


def sizes(min_bytes, max_bytes, factor=2):
    '''The sizes from *min_bytes* to *max_bytes*, each *factor* times the
    last (``-b``, ``-e``, ``-f``).'''
    found, size = [], min_bytes
    while size <= max_bytes:
        found.append(size)
        size *= factor
    return found


def counts(op, size, elt_size, n):
    '''(count, send elements, receive elements) per rank of *op* on *n*
    ranks for a *size*-byte message of *elt_size*-byte elements, as
    nccl-tests' ``*GetCollByteCount`` compute them: all-reduce's count is
    the buffer's; all-gather's and reduce-scatter's is each rank's share,
    rounded down to 16 bytes.'''
    count = size // elt_size
    if op == 'all_reduce':
        return count, count, count
    base = (count // n) & ~(16 // elt_size - 1)
    if op == 'all_gather':
        return base, base, base * n
    if op == 'reduce_scatter':
        return base, base * n, base
    raise ValueError(f'unknown operation {op!r}: use {", ".join(OPS)}')


def bandwidths(op, size_bytes, seconds, n):
    '''(algbw, busbw) in GB/s of *op* moving the whole array of
    *size_bytes* (S) in *seconds* on *n* ranks.'''
    algbw = size_bytes / 1e9 / seconds
    return algbw, algbw * BUS_FACTOR[op](n)


def float_cell(value, width):
    '''*value* in *width* characters as nccl-tests prints it
    (``getFloatStr``: 2 decimals, fewer where they do not fit, else an
    exponent).'''
    for fmt in ('%*.2f', '%*.1f', '%*.0f'):
        text = fmt % (width, value)
        if len(text) <= width:
            return text
    return ('%*.1e' if width >= 7 else '%*.0e') % (width, value)


def header_lines(op, type_name):
    '''nccl-tests' table header (with the ``root`` column of 2.10 and
    later), with the one placement group this program measures.'''
    group = PLACEMENT[op]
    return [
        f'#{"":>56}{group:>18}',
        '# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s' % (
            'size', 'count', 'type', 'redop', 'root', 'time', 'algbw',
            'busbw', '#wrong'),
        '# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s' % (
            '(B)', '(elements)', '', '', '', '(us)', '(GB/s)', '(GB/s)', ''),
    ]


def result_line(size, count, type_name, redop, seconds, algbw, busbw,
                wrong):
    '''One line of nccl-tests' table: size, count, type, redop, root
    (-1: no root), then time (us), algbw, busbw, wrong elements.'''
    return ('%12d  %12d  %8s  %6s  %6s' % (size, count, type_name, redop,
                                           '-1') +
            '  %7s  %6s  %6s  %6g' % (float_cell(seconds * 1e6, 7),
                                      float_cell(algbw, 6),
                                      float_cell(busbw, 6), wrong))


def precise_line(seconds, slowest, algbw, busbw):
    '''The comment after a row: its figures to 6 significant digits and
    the slowest rank's time.'''
    return (f'# hpcml: time_us={seconds * 1e6:.6g} '
            f'max_time_us={slowest * 1e6:.6g} algbw_GBps={algbw:.6g} '
            f'busbw_GBps={busbw:.6g}')
