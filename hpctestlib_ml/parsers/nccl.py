"""NCCL's version and the network transport each process's NCCL chose,
from NCCL's own INFO log in a job's output (``NCCL_DEBUG=INFO``, with
``NCCL_DEBUG_SUBSYS=INIT,NET`` enough). On a cluster without the IB verbs
library or the site's net plugin (Slingshot without aws-ofi-nccl, RoCE
without its drivers in the container) NCCL falls back to TCP sockets
without an error: this says so.

What NCCL prints (excerpts of real logs, with their sources, in
``tests/data/nccl/``)::

    NCCL version 2.19.3+cuda12.3                      (rank 0; from 2.22 behind
    host:pid:tid [0] NCCL INFO NCCL version 2.29.2+cuda12.8   the usual prefix)
    host:pid:tid [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:...
    host:pid:tid [0] NCCL INFO Using network IB       (IB, IBext_v8, Socket,
                                                      AWS Libfabric, Libfabric)
    host:pid:tid [0] NCCL INFO NET/OFI Selected Provider is cxi (found 8 nics)

``Using network <name>`` is the choice (NCCL 2.5 and later). Older NCCL
(2.4) has no such line, and each process printed ``NET/Socket : Using`` for
its bootstrap whatever it chose: there ``NET/IB : Using`` says IB, and
``NET/IB : No device found.`` beside ``NET/Socket : Using`` says sockets; a
process with neither is left out. Lines may sit behind a launcher's label
(``0: ``, ``[default0]:``, ``[155] ``) or have lost their ``host:pid:tid``
prefix: the known labels are taken off first
(:mod:`~hpctestlib_ml.parsers.labels`) and NCCL's own line is found
anywhere in a line.

Standard library only.
"""
import re

from hpctestlib_ml.parsers import labels

#: NCCL's line prefix: ``host:pid:tid [cudaDev] NCCL INFO <message>``.
_INFO = re.compile(r'(?:(?P<host>[^\s:\[\]]+):(?P<pid>\d+):\d+ \[\d+\] )?'
                   r'NCCL INFO (?P<msg>.*)')
_VERSION = re.compile(r'\bNCCL version (\d+\.\d+\.\d+)')
_NETWORK = re.compile(r'^Using (?:internal )?[Nn]etwork (.+?)\s*$')
_NET_USING = re.compile(r'^NET/(IB|Socket) ?: Using \[')
_NO_IB = re.compile(r'^NET/IB ?: No device found')
_OFI_PROVIDER = re.compile(r'^NET/OFI Selected [Pp]rovider is (\w+)')
_COMM_RANK = re.compile(r'\bcomm 0x[0-9a-f]+ rank (\d+) n[Rr]anks (\d+)')


def _transport(name, provider):
    '''The transport a ``Using network`` name stands for: ``IB`` (NCCL's IB
    verbs transport and HPC-X's IBext plugins, over InfiniBand or RoCE),
    ``Socket``, ``OFI`` (the libfabric plugin, ``OFI/cxi`` with its
    provider), else the name itself.'''
    if re.match(r'IB(ext)?(_v\d+)?$', name):
        return 'IB'
    if name == 'Socket':
        return 'Socket'
    if 'libfabric' in name.lower() or name.upper().startswith('OFI'):
        return f'OFI/{provider}' if provider else 'OFI'
    return name


def processes(text):
    '''``{process: {'net': ..., 'rank': ...}}`` for each process whose NCCL
    logged its network: the process is ``host:pid`` (``?`` where the lines
    lost their prefix); ``rank`` is its rank in the largest communicator it
    initialised, where its log says (else None).'''
    chosen, provider, ranks = {}, {}, {}
    seen = {}                  # NCCL 2.4: {process: {'IB', 'Socket', 'no IB'}}
    for line in labels.strip(text).splitlines():
        match = _INFO.search(line)
        if not match:
            continue
        key = (f'{match["host"]}:{match["pid"]}' if match['host'] else '?')
        msg = match['msg']
        if m := _NETWORK.match(msg):
            chosen[key] = m.group(1)
        elif m := _NET_USING.match(msg):
            seen.setdefault(key, set()).add(m.group(1))
        elif _NO_IB.match(msg):
            seen.setdefault(key, set()).add('no IB')
        elif m := _OFI_PROVIDER.match(msg):
            provider[key] = m.group(1)
        elif m := _COMM_RANK.search(msg):
            rank, size = int(m.group(1)), int(m.group(2))
            if size > ranks.get(key, (None, 0))[1]:
                ranks[key] = (rank, size)
    found = {}
    for key in set(chosen) | set(seen):
        if key in chosen:
            net = _transport(chosen[key], provider.get(key))
        elif 'IB' in seen[key]:
            net = 'IB'
        elif {'no IB', 'Socket'} <= seen[key]:
            net = 'Socket'
        else:
            continue
        found[key] = {'net': net, 'rank': ranks.get(key, (None,))[0]}
    return found


def nccl_version(text):
    '''NCCL's version as its log prints it (``2.21.5`` of
    ``NCCL version 2.21.5+cuda12.4``); several, comma-separated, where the
    processes loaded different ones; '' where the log has none.'''
    versions = sorted(set(_VERSION.findall(text)),
                      key=lambda v: tuple(int(x) for x in v.split('.')))
    return ','.join(versions)


def nccl_facts(text):
    '''``{'nccl_version': '2.21.5', 'nccl_net': 'IB'}`` from a job's log:
    the version NCCL printed, and the transport the processes chose (``IB``,
    ``Socket``, ``OFI/cxi``, ...; ``IB+Socket`` where they differ: some
    ranks on sockets). Keys only for what the log shows.'''
    facts = {}
    version = nccl_version(text)
    if version:
        facts['nccl_version'] = version
    nets = sorted({p['net'] for p in processes(text).values()})
    if nets:
        facts['nccl_net'] = '+'.join(nets)
    return facts
