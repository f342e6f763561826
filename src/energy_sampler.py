"""python energy_sampler.py OUTFILE [RSSFILE]: sample this node's energy
counters, and the training processes' peak memory, until the process that
started it ends.

src/task_env.sh starts one per node (the node's first task) just before the
training program, and sends it SIGTERM when the program has ended: it then
takes one last sample and stops (so the samples cover the program's timed
region however soon after it the program exits). It also stops when its
parent ends (when it was started before an ``exec``). Every
:data:`INTERVAL` seconds it appends ``unix_time,joules...`` to OUTFILE: one
cumulative column per counter source, so the check integrates any window
(the timed region of the log) by interpolation, never the whole program.

Sources, all that are readable:

``nvml``   GPUs' total energy (``nvmlDeviceGetTotalEnergyConsumption``, mJ,
           Volta and later) of the case's GPUs on this node
           (:mod:`node_gpus`: Slurm's GPUs of the step on the node, else
           the visibility variable, else the first HPCML_GPUS_PER_NODE):
           NVML numbers all of the node's GPUs and ignores
           CUDA_VISIBLE_DEVICES, and the sampler's task may be bound to one
           GPU of the node's four.
``rapl``   CPU packages' ``energy_uj`` under /sys/class/powercap (or
           ``HPCML_POWERCAP_ROOT``), top-level ``intel-rapl:N`` domains only
           (their sub-domains are parts of them), wrap-around corrected.
``jpwr``   JSC's jpwr back-ends where its counters are the right ones:
           ``jpwr.sys.gh`` (GH200 module power, CPU and GPU: used alone, so
           nothing is counted twice) and ``jpwr.gpu.rocm`` (AMD GPUs, when
           NVML has none; its sensors ``rocm:<i>`` are rocm-smi's device
           indices, kept for the case's GPUs as for NVML); they give
           watts, integrated here (trapezoids).

Without any, OUTFILE gets one line, ``# none: <reason>``; so it does where
a GPU counter is there but cannot be matched to the case's GPUs, or where
HPCML_GPUS_PER_NODE says the case uses GPUs and no GPU counter is readable
(the CPU packages alone are not a GPU node's energy).

RSSFILE (optional) gets ``max_rss_kib N``: the largest peak resident set
(``VmHWM``) of the processes under its parent (the program and torchrun's
workers; not this sampler) seen so far, rewritten when it grows. The walk
of /proc this takes runs every :data:`RSS_INTERVAL` seconds and once at the
end (``VmHWM`` is itself a peak: a slower walk only misses a worker that
peaks and exits between two walks).
"""
import os
import pathlib
import re
import signal
import sys
import time

import node_gpus

#: Seconds between energy samples: a 20 s timed region gets 100.
INTERVAL = 0.2
#: Seconds between walks of the program's processes for their peak memory.
RSS_INTERVAL = 1.0


class CannotCount(Exception):
    '''A GPU counter is there but cannot count the case's GPUs: no energy
    figure rather than a wrong one.'''


def select(devices, counted):
    '''The ordinals of *devices* (``(ordinal, uuid, minor)`` of each device
    the counter sees) that :class:`node_gpus.Counted` *counted* names;
    CannotCount where some are not among them.'''
    if counted.match == 'all':
        return [d[0] for d in devices]
    column = {'slurm': 2, 'first': 0}.get(counted.match)
    chosen, missing = [], []
    for wanted in counted.ids:
        found = [d[0] for d in devices
                 if (str(d[column]) == wanted if column is not None
                     else str(d[0]) == wanted or
                     (d[1] and d[1].startswith(wanted)))]
        if found:
            chosen.append(found[0])
        else:
            missing.append(wanted)
    if missing:
        what = {'slurm': 'minor numbers', 'first': 'indices',
                'visible': 'indices or UUIDs'}[counted.match]
        seen = ', '.join(str(d[column if column is not None else 0])
                         for d in devices) or 'none'
        raise CannotCount(
            f'GPUs {",".join(missing)} of {counted.source} are not among the '
            f'{len(devices)} the energy counter sees ({what} {seen}): a '
            f'device cgroup per task, or ids the counter cannot match')
    return sorted(set(chosen))


def _counted(env, vendor):
    try:
        counted = node_gpus.counted_gpus(env, vendor)
    except node_gpus.NodeGpusError as err:
        raise CannotCount(str(err)) from None
    if counted.ids == ():
        raise LookupError(f'the case uses no GPU on this node '
                          f'({counted.source})')
    return counted


class Rapl:
    name = 'rapl'

    def __init__(self, root):
        root = pathlib.Path(root)
        self.domains = sorted(p for p in root.glob('intel-rapl:*')
                              if re.fullmatch(r'intel-rapl:\d+', p.name))
        if not self.domains:
            raise LookupError(f'no RAPL domains under {root}')
        try:
            self.last = [self._read(d) for d in self.domains]
        except PermissionError:
            raise LookupError(f'RAPL counters under {root} are not readable '
                              f'(root only since Linux 5.10: ask the site '
                              f'for read access to energy_uj)') from None
        self.ranges = [int((d / 'max_energy_range_uj').read_text())
                       if (d / 'max_energy_range_uj').exists() else 2 ** 32
                       for d in self.domains]
        self.total = 0.0
        self.label = f'rapl({len(self.domains)} packages)'

    @staticmethod
    def _read(domain):
        return int((domain / 'energy_uj').read_text())

    def joules(self):
        for i, domain in enumerate(self.domains):
            now = self._read(domain)
            delta = now - self.last[i]
            if delta < 0:                         # the counter wrapped
                delta += self.ranges[i]
            self.total += delta / 1e6
            self.last[i] = now
        return self.total


class Nvml:
    name = 'nvml'

    def __init__(self, env=None):
        try:
            import pynvml
        except ImportError:
            raise LookupError('pynvml (nvidia-ml-py) is not installed') \
                from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:
            raise LookupError(f'NVML: {err}') from None
        self.nvml = pynvml
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                   for i in range(pynvml.nvmlDeviceGetCount())]
        if not handles:
            raise LookupError('no GPU visible to NVML')
        counted = _counted(os.environ if env is None else env, 'nvidia')
        devices = [(i, _text(pynvml.nvmlDeviceGetUUID(h)),
                    self._minor(h) if counted.match == 'slurm' else None)
                   for i, h in enumerate(handles)]
        handles = [handles[i] for i in select(devices, counted)]
        self.handles = handles
        self.first = [self._millijoules(h) for h in handles]
        self.label = f'nvml({len(handles)} GPUs)'

    def _minor(self, handle):
        '''The device file's number (``/dev/nvidia<minor>``): what Slurm's
        global GPU ids follow.'''
        try:
            return self.nvml.nvmlDeviceGetMinorNumber(handle)
        except self.nvml.NVMLError:
            return None

    def _millijoules(self, handle):
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle)

    def joules(self):
        return sum(self._millijoules(h) - f
                   for h, f in zip(self.handles, self.first)) / 1e3


class Jpwr:
    name = 'jpwr'

    def __init__(self, module):
        import importlib
        try:
            method = importlib.import_module(module).power()
            self.values = {}
            method.init(self.values)
            method.measure(self.values)
        except Exception as err:            # jpwr raises what it meets
            raise LookupError(f'{module}: {err}') from None
        if not self.values:
            raise LookupError(f'{module}: no power sensors')
        self.method = method
        self.keys = self._sensors()
        self.label = f'jpwr({module.split(".")[-1]}: {len(self.keys)} sensors)'
        self.last = (time.time(), self._watts())
        self.total = 0.0

    def _sensors(self):
        '''The sensors (keys of jpwr's values) that count: all.'''
        return list(self.values)

    def _watts(self):
        for series in self.values.values():
            series.clear()
        self.method.measure(self.values)
        return sum(self.values[k][-1] for k in self.keys if self.values[k])

    def joules(self):
        now, watts = time.time(), self._watts()
        self.total += (now - self.last[0]) * (watts + self.last[1]) / 2
        self.last = (now, watts)
        return self.total


class JpwrRocm(Jpwr):
    '''AMD GPUs through ``jpwr.gpu.rocm``: its sensors ``rocm:<i>`` are
    rocm-smi's device indices over the whole node (rocm-smi ignores
    ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES); only the case's GPUs
    count, matched by index (Slurm's global ids, or the physical indices
    of the visibility variables: not UUIDs, which jpwr does not give).'''

    def __init__(self, env=None):
        self.env = os.environ if env is None else env
        super().__init__('jpwr.gpu.rocm')
        self.label = f'jpwr(rocm: {len(self.keys)} GPUs)'

    def _sensors(self):
        counted = _counted(self.env, 'amd')
        by_index = {int(k.split(':')[1]): k for k in self.values
                    if re.fullmatch(r'rocm:\d+', k)}
        devices = [(i, None, i) for i in sorted(by_index)]
        return [by_index[i] for i in select(devices, counted)]


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _first(makers, reasons):
    for make in makers:
        try:
            return make()
        except (LookupError, OSError) as err:
            reasons.append(str(err))
    return None


def open_sources(env=None):
    '''(sources, reasons): the node's counters, and why others are not;
    no sources where the case's GPUs cannot be counted.'''
    env = os.environ if env is None else env
    reasons = []
    try:
        module = _first([lambda: Jpwr('jpwr.sys.gh')], reasons)
        if module:
            return [module], reasons      # GH200: the whole module
        gpus = _first([lambda: Nvml(env), lambda: JpwrRocm(env)], reasons)
    except CannotCount as err:
        return [], [str(err)]
    try:
        uses_gpus = bool(node_gpus.gpus_per_node(env))
    except node_gpus.NodeGpusError as err:
        return [], [str(err)]
    if uses_gpus and not gpus:
        setting = f'{node_gpus.GPUS_PER_NODE}={env[node_gpus.GPUS_PER_NODE]}'
        return [], [f'no GPU energy counter for a case with GPUs '
                    f'({setting})'] + reasons
    cpus = _first([lambda: Rapl(env.get('HPCML_POWERCAP_ROOT',
                                        '/sys/class/powercap'))],
                  reasons)
    return [s for s in (gpus, cpus) if s], reasons


def descendants(pid):
    '''*pid* and every process below it (via /proc/PID/task/*/children).'''
    found, todo = [], [pid]
    while todo:
        pid = todo.pop()
        found.append(pid)
        for children in pathlib.Path(f'/proc/{pid}/task').glob('*/children'):
            try:
                todo += [int(c) for c in children.read_text().split()]
            except OSError:
                pass
    return found


def peak_rss_kib(pid, exclude=None):
    '''The largest VmHWM among *pid* and its descendants but *exclude*,
    in KiB.'''
    peak = 0
    for p in descendants(pid):
        if p == exclude:
            continue
        try:
            status = pathlib.Path(f'/proc/{p}/status').read_text()
        except OSError:
            continue
        match = re.search(r'^VmHWM:\s+(\d+) kB', status, re.M)
        if match:
            peak = max(peak, int(match.group(1)))
    return peak


def main(outfile, rssfile=None):
    # SIGTERM (the program has ended) is taken synchronously, as the end of
    # a wait between samples, so that it never cuts a sample short.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    sources, reasons = open_sources()
    parent = os.getppid()
    peak, last, next_walk = 0, False, 0.0
    with open(outfile, 'w') as out:
        if sources:
            out.write('# ' + '+'.join(s.label for s in sources) + '\n')
            out.write(','.join(['time'] + [s.name for s in sources]) + '\n')
        else:
            out.write(f'# none: {"; ".join(reasons)}\n')
        out.flush()
        while True:
            ending = last or os.getppid() != parent   # the program ended
            if sources:
                values = [s.joules() for s in sources]
                out.write(f'{time.time():.6f},' +
                          ','.join(f'{v:.3f}' for v in values) + '\n')
                out.flush()
            if rssfile and (ending or time.monotonic() >= next_walk):
                next_walk = time.monotonic() + RSS_INTERVAL
                now = peak_rss_kib(parent, exclude=os.getpid())
                if now > peak:
                    peak = now
                    pathlib.Path(rssfile).write_text(f'max_rss_kib {peak}\n')
            if ending:
                return 0
            last = signal.sigtimedwait({signal.SIGTERM}, INTERVAL) is not None


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:3]))
