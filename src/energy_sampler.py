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
           Volta and later) of the GPUs in CUDA_VISIBLE_DEVICES only: NVML
           numbers all of the node's GPUs and ignores that variable.
``rapl``   CPU packages' ``energy_uj`` under /sys/class/powercap (or
           ``HPCML_POWERCAP_ROOT``), top-level ``intel-rapl:N`` domains only
           (their sub-domains are parts of them), wrap-around corrected.
``jpwr``   JSC's jpwr back-ends where its counters are the right ones:
           ``jpwr.sys.gh`` (GH200 module power, CPU and GPU: used alone, so
           nothing is counted twice) and ``jpwr.gpu.rocm`` (AMD GPUs, when
           NVML has none); they give watts, integrated here (trapezoids).

Without any, OUTFILE gets one line, ``# none: <reason>``.

RSSFILE (optional) gets ``max_rss_kib N``: the largest peak resident set
(``VmHWM``) of the processes under its parent (the program and torchrun's
workers; not this sampler) seen so far, rewritten at every sample.
"""
import os
import pathlib
import re
import signal
import sys
import time

INTERVAL = 1.0


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

    def __init__(self):
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
        visible = os.environ.get('CUDA_VISIBLE_DEVICES')
        if visible:
            wanted = [v.strip() for v in visible.split(',') if v.strip()]
            handles = [h for i, h in enumerate(handles)
                       if str(i) in wanted or
                       _text(pynvml.nvmlDeviceGetUUID(h)) in wanted]
        if not handles:
            raise LookupError('no GPU visible to NVML')
        self.handles = handles
        self.first = [self._millijoules(h) for h in handles]
        self.label = f'nvml({len(handles)} GPUs)'

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
        self.label = f'jpwr({module.split(".")[-1]}: {len(self.values)} sensors)'
        self.last = (time.time(), self._watts())
        self.total = 0.0

    def _watts(self):
        for series in self.values.values():
            series.clear()
        self.method.measure(self.values)
        return sum(series[-1] for series in self.values.values() if series)

    def joules(self):
        now, watts = time.time(), self._watts()
        self.total += (now - self.last[0]) * (watts + self.last[1]) / 2
        self.last = (now, watts)
        return self.total


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _first(makers, reasons):
    for make in makers:
        try:
            return make()
        except (LookupError, OSError) as err:
            reasons.append(str(err))
    return None


def open_sources():
    '''(sources, reasons): the node's counters, and why others are not.'''
    reasons = []
    module = _first([lambda: Jpwr('jpwr.sys.gh')], reasons)
    if module:
        return [module], reasons          # GH200: the whole module
    gpus = _first([Nvml, lambda: Jpwr('jpwr.gpu.rocm')], reasons)
    cpus = _first([lambda: Rapl(os.environ.get('HPCML_POWERCAP_ROOT',
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
    peak, last = 0, False
    with open(outfile, 'w') as out:
        if sources:
            out.write('# ' + '+'.join(s.label for s in sources) + '\n')
            out.write(','.join(['time'] + [s.name for s in sources]) + '\n')
        else:
            out.write(f'# none: {"; ".join(reasons)}\n')
        out.flush()
        while True:
            if sources:
                values = [s.joules() for s in sources]
                out.write(f'{time.time():.6f},' +
                          ','.join(f'{v:.3f}' for v in values) + '\n')
                out.flush()
            if rssfile:
                now = peak_rss_kib(parent, exclude=os.getpid())
                if now > peak:
                    peak = now
                    pathlib.Path(rssfile).write_text(f'max_rss_kib {peak}\n')
            if last or os.getppid() != parent:    # the program has ended
                return 0
            last = signal.sigtimedwait({signal.SIGTERM}, INTERVAL) is not None


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:3]))
