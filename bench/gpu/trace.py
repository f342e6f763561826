"""The ``nvidia-smi`` trace beside a validation phase: read it, and
integrate its power over a case's timed window (the energy the suite's
NVML counter should agree with) or take its peak memory there.

``validate.sh`` writes it with ``nvidia-smi --query-gpu=timestamp,index,
power.draw.instant,power.draw,memory.used,utilization.gpu,clocks.sm
--format=csv,nounits -lms 200 -i 0`` (``power.draw.instant`` where the
driver has it: ``power.draw`` is a one-second average on recent drivers,
which lags a short window). Timestamps are the machine's local time,
``2026/11/25 11:25:32.123``, as the suite's local-time log stamps are.
"""
import bisect
import csv
import time

#: Power columns in the order preferred.
POWER_COLUMNS = ('power.draw.instant', 'power.draw')


class TraceError(LookupError):
    '''Why a trace gives no figure for a window.'''


def _column(name):
    # 'power.draw.instant [W]' (csv without nounits) or 'power.draw.instant'
    return name.strip().split(' [')[0]


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None                   # '[N/A]', '[Not Supported]', cut short


def parse_time(text):
    '''Unix seconds of an nvidia-smi timestamp (local time).'''
    text = text.strip()
    main, _, fraction = text.partition('.')
    seconds = time.mktime(time.strptime(main, '%Y/%m/%d %H:%M:%S'))
    return seconds + (float(f'0.{fraction}') if fraction.isdigit() else 0.0)


class Trace:
    '''Samples of one GPU: ``times`` (Unix s, increasing) and a list of
    values per column (None where unreadable).'''

    def __init__(self, times, columns):
        self.times = times
        self.columns = columns

    @classmethod
    def read(cls, path, gpu=0):
        '''The samples of GPU *gpu* in the csv at *path*; lines cut short
        (the trace is killed mid-line) are skipped.'''
        with open(path, newline='', errors='replace') as fp:
            rows = list(csv.reader(fp))
        if not rows:
            raise TraceError(f'{path} is empty')
        header = [_column(h) for h in rows[0]]
        if 'timestamp' not in header:
            raise TraceError(f'{path}: no timestamp column (not an '
                             f'nvidia-smi --query-gpu trace)')
        times, columns = [], {h: [] for h in header}
        for row in rows[1:]:
            if len(row) != len(header):
                continue
            fields = dict(zip(header, (f.strip() for f in row)))
            if 'index' in fields and _number(fields['index']) != gpu:
                continue
            try:
                moment = parse_time(fields['timestamp'])
            except ValueError:
                continue
            if times and moment <= times[-1]:
                continue
            times.append(moment)
            for name in header:
                columns[name].append(_number(fields[name]))
        return cls(times, columns)

    def power_column(self):
        '''The name of the power column read (instantaneous if present).'''
        for name in POWER_COLUMNS:
            if any(v is not None for v in self.columns.get(name, ())):
                return name
        raise TraceError('the trace has no power readings')

    def _series(self, name):
        pairs = [(t, v) for t, v in zip(self.times, self.columns[name])
                 if v is not None]
        return [t for t, _ in pairs], [v for _, v in pairs]

    def energy(self, start, stop):
        '''(joules, samples inside) of the power column integrated by
        trapezoids from *start* to *stop*, linear between samples;
        TraceError unless samples cover the window.'''
        times, watts = self._series(self.power_column())
        if len(times) < 2 or times[0] > start or times[-1] < stop:
            span = f'{times[0]:.1f}-{times[-1]:.1f}' if times else 'nothing'
            raise TraceError(f'the trace ({span}) does not cover the '
                             f'window {start:.1f}-{stop:.1f}')
        inside = [i for i, t in enumerate(times) if start < t < stop]
        points = ([(start, _at(times, watts, start))] +
                  [(times[i], watts[i]) for i in inside] +
                  [(stop, _at(times, watts, stop))])
        joules = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1)
                     in zip(points, points[1:]))
        return joules, len(inside)

    def peak(self, name, start, stop):
        '''The largest reading of column *name* from *start* to *stop*,
        or None.'''
        times, values = self._series(name) if name in self.columns else ([],
                                                                          [])
        inside = [v for t, v in zip(times, values) if start <= t <= stop]
        return max(inside) if inside else None


def _at(times, values, t):
    i = bisect.bisect_left(times, t)
    if i == 0:
        return values[0]
    if i == len(times):
        return values[-1]
    t0, t1 = times[i - 1], times[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (t - t0) / (t1 - t0)
