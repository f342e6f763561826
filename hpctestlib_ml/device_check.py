"""What the programs' ``[hpcml]`` records (:mod:`hpctestlib_ml.parsers.
hpcml_records`) say about a run's devices, and what is wrong with it:
pure functions over the parsed records, so that the CPU tests feed them
what a GPU node prints.

A GPU case that trained on the CPU (a CUDA build of torch on an older
driver, a container started without ``--nv``) runs to the end and would
pass with CPU figures against the GPU's peak: :func:`device_problems`
fails it, in one line, from what the ranks themselves say they ran on.
"""
import re
import statistics

from hpctestlib_ml import peaks

#: A MIG slice's name as CUDA gives it (``torch.cuda.get_device_name``):
#: the whole GPU's and its profile, ``NVIDIA A100-SXM4-40GB MIG 1g.5gb``
#: (HTCondor's ``condor_gpu_discovery`` manual lists such devices).
MIG_NAME = re.compile(r'\sMIG\s+\d+g\.\d+gb\b', re.IGNORECASE)


def _kinds(records):
    return {r.get('kind') for r in records}


def device_problems(records, expected_kind, world_size, partition,
                    partition_model=None, peak_given=False):
    '''One-line reasons why the ``device`` *records* of a run do not show
    the devices its partition has; [] if they do. *expected_kind*:
    ``gpu`` or ``cpu``; *partition_model*: the partition's GPU model key
    (``H100-SXM``), if the site config names one; *peak_given*: whether
    the partition gives its devices' peak (``extras['device_peak_flops']``),
    which a MIG slice needs: its name matches the whole GPU's model, whose
    peak it has a fraction of.'''
    if not records:
        return [f'no rank printed its [hpcml] device record: the program '
                f'did not say what it ran on']
    problems = []
    wrong = [r for r in records if r.get('kind') != expected_kind]
    if wrong:
        first = wrong[0]
        what = (f'{first.get("kind")} ({first.get("name")}, '
                f'{first.get("framework")} built for {first.get("runtime")})')
        has = ('GPUs' if expected_kind == 'gpu' else 'no GPU in this case')
        problems.append(f'{len(wrong)} of {len(records)} ranks ran on {what}, '
                        f'but partition {partition} has {has}')
    ranks = {r.get('rank') for r in records}
    if len(ranks) != world_size:
        missing = sorted(set(range(world_size)) - ranks)
        problems.append(f'{len(ranks)} of {world_size} ranks printed their '
                        f'device (missing: {missing[:8]})')
    gpu_names = sorted({str(r.get('name')) for r in records
                        if r.get('kind') == 'gpu'})
    slices = [name for name in gpu_names if MIG_NAME.search(name)]
    if expected_kind == 'gpu' and slices and not peak_given:
        problems.append(
            f'the GPU that ran is a MIG slice ({slices[0]!r}), measured '
            f"against the whole GPU's peak: set the slice's peak FLOP/s "
            f"in extras['device_peak_flops'] of partition {partition}")
    if expected_kind == 'gpu' and partition_model:
        for name in sorted({r.get('name') for r in records
                            if r.get('kind') == 'gpu'}):
            ran = peaks.model_key(name)
            if ran and ran != partition_model:
                problems.append(
                    f'the GPU that ran is {name!r} ({ran}), but partition '
                    f'{partition} says {partition_model}: MFU would use the '
                    f"wrong peak; fix the partition's devices model in the "
                    f'site config')
    return problems


def device_summary(records):
    '''What ran, for the perflog's ``device_ran``: ``gpu cuda NVIDIA H100
    80GB HBM3 x4`` (kind, backend, product name, ranks), one entry per
    distinct device kind and name; '' without records.'''
    counts = {}
    for r in records:
        key = (r.get('kind'), r.get('backend'), r.get('name'))
        counts[key] = counts.get(key, 0) + 1
    parts = []
    for (kind, backend, name), n in sorted(counts.items(),
                                           key=lambda kv: str(kv[0])):
        words = [kind] + ([backend] if backend and backend != kind else [])
        parts.append(' '.join(map(str, words + [name, f'x{n}'])))
    return '; '.join(parts).replace('|', '/')


def tf32(records):
    '''Whether fp32 matrix products ran on TF32: True if every rank says
    so, False if any says not, None without records.'''
    values = [r.get('tf32') for r in records if 'tf32' in r]
    if not values:
        return None
    return all(bool(v) for v in values)


def loaded_nccl(records):
    '''The NCCL version the ranks' framework loaded (``2.21.5``), '' where
    no GPU rank says.'''
    return next((r.get('nccl') for r in records
                 if r.get('kind') == 'gpu' and r.get('nccl')), '')


def gpu_memory_peak(records):
    '''The largest device memory a rank held (MiB): the allocator's
    reserved peak where known, else its allocated peak; None without
    ``memory`` records (CPUs).'''
    values = [r.get('peak_reserved_MiB') if r.get('peak_reserved_MiB')
              is not None else r.get('peak_allocated_MiB') for r in records]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def data_share(records):
    '''Percent of the steady-state step time the ranks spent waiting for
    data, from their ``timing`` records; None without any.'''
    data = sum(r.get('data_s') or 0.0 for r in records)
    compute = sum(r.get('compute_s') or 0.0 for r in records)
    if not records or data + compute <= 0:
        return None
    return 100 * data / (data + compute)


#: The largest ``rank_compute_spread`` (%) that is noise, not a slow rank:
#: above it the check names the slowest rank (``slowest_rank``). Measured
#: on the project's Slurm cluster (two nodes of one CPU each on this 2-core
#: VM, other sessions' tests beside it; CosmoFlow tiny, 2 nodes, 200
#: steps; ``bench/slow_node_bench.py``, ``bench/results/
#: slow_node_2026-11-26.json``): 36 unslowed runs spread by 1.1 % (median),
#: 6.3 % (95th percentile), 8.8 % at most; with n2 held to 20 % of a core
#: by 60-63 % (5 runs), to 50 % by 24-28 % (5 runs), to 80 % by 5.5-7.4 %
#: (5 runs, within the noise: not named). 15 % is 1.7 times the largest
#: unslowed spread: 0 of 36 unslowed runs named a rank, 10 of 10 runs
#: slowed to 20 or 50 % named n2's. (With two ranks the median is their
#: mean, so the spread is at most 100 %: a rank twice as slow is +33 %.)
RANK_SPREAD_NOISE_PCT = 15.0


def rank_compute_spread(records):
    '''(spread, slowest record) of the ranks' ``rank_compute`` *records*:
    the spread is how much longer the slowest rank's mean compute per step
    is than the median rank's, in %: 0 for one rank (its own median), so
    that every case of a check logs the same columns; None without any
    record. The mean, not the median of the steps: the step time follows
    each rank's total (:mod:`rank_compute` in ``src/``).'''
    by_rank = {r.get('rank'): r for r in records
               if isinstance(r.get('mean_s'), (int, float))}
    if not by_rank:
        return None
    center = statistics.median(r['mean_s'] for r in by_rank.values())
    slowest = max(by_rank.values(), key=lambda r: r['mean_s'])
    if center <= 0:
        return None
    return 100 * (slowest['mean_s'] / center - 1), slowest


def slowest_rank(records, noise_pct=RANK_SPREAD_NOISE_PCT):
    '''The slowest rank and its node where the ranks' spread is above the
    noise, ``rank 3 on n2, +27 %``; '' where it is within it or there are
    fewer than two ranks.'''
    found = rank_compute_spread(records)
    if found is None or found[0] <= noise_pct:
        return ''
    spread, record = found
    return (f'rank {record.get("rank")} on {record.get("node") or "?"}, '
            f'+{spread:.0f} %').replace('|', '/')
