#!/usr/bin/env python3
"""How well the slow node is named, on real runs of the project's Slurm
cluster (bench/slow_node_runs.sh writes them: each session a node sweep
and a 2-node run, unslowed, or with a node held to a share of a core).

Node sweeps (``hpcml report``'s "Slow nodes", hpctestlib_ml/report/nodes):

- the noise: each node's figure over the unslowed sessions (robust spread,
  1.4826 x MAD / median), and the gap between the nodes of one sweep;
- false alarms: the share of unslowed sweeps in which any node is
  flagged, and the lowest score seen, at each threshold of --thresholds;
- detection: the share of slowed sweeps in which the slowed node, and no
  other, is flagged, with its score and how much slower it was;
- both again as ``hpcml report`` decides, where the partition declares
  its noise (``reference_noise_pct`` in the perflogs): no node within it
  is slow.

2-node runs (the check's ``rank_compute_spread`` and ``slowest_rank``,
from the ranks' ``rank_compute`` records in each job's output, at
today's threshold): the spread of the unslowed runs (the noise the
threshold must clear) and of the slowed ones, the runs named (the slowed
node) or falsely named, and the runs above each of a few thresholds.

    bench/slow_node_bench.py OUT_DIR [--json FILE]
"""
import argparse
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from hpctestlib_ml import device_check                    # noqa: E402
from hpctestlib_ml.parsers import hpcml_records            # noqa: E402
from hpctestlib_ml.report import analysis, history, nodes  # noqa: E402

THRESHOLDS = (2.0, 2.5, 3.0, 3.5, 4.0, 5.0)
#: Floors of the spread (nodes.MIN_SPREAD) tried with each threshold.
MIN_SPREADS = (0.02, 0.03, 0.05, 0.08)
#: Thresholds of the ranks' spread (%) tried.
RANK_THRESHOLDS = (10, 12, 15, 20, 25)


def sessions(out_dir):
    '''label -> [(sweep's NodeScores, 2-node run's rank records, the
    partition's declared noise in %: None for none)] of each session.'''
    headlines = analysis.load_weights()
    found = {}
    for session in sorted(glob.glob(os.path.join(out_dir, '*', 's[0-9]*'))):
        label = os.path.basename(os.path.dirname(session))
        sweep = read(os.path.join(session, 'sweep'))
        scored = nodes.sweeps(sweep, headlines, window=float('inf'))
        noise = scored[0].noise if scored else None
        found.setdefault(label, []).append(
            (scored[0].nodes if scored else None,
             rank_records(os.path.join(session, 'two_nodes')),
             None if noise is None else 100 * noise))
    return found


def rank_records(var_dir):
    '''The ``rank_compute`` records of the 2-node run's ranks (its
    job's output), or None where it wrote none.'''
    for path in glob.glob(os.path.join(var_dir, 'output', '**',
                                       'rfm_job.out'), recursive=True):
        with open(path, errors='replace') as fp:
            records = hpcml_records.records(fp.read(), 'rank_compute')
        if records:
            return records
    return None


def read(var_dir):
    path = os.path.join(var_dir, 'perflogs')
    return history.read_perflogs([path]).runs if os.path.isdir(path) else []


def robust_spread(values):
    center = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - center) for v in values) / \
        center


def sweep_noise(unslowed):
    '''Each node's run-to-run noise and the gap between the nodes of a
    sweep, over the unslowed sessions.'''
    per_node = {}
    gaps = []
    for scores, *_ in unslowed:
        if not scores:
            continue
        for s in scores:
            per_node.setdefault(s.node, []).append(s.value)
        values = [s.value for s in scores]
        gaps.append(max(values) / min(values) - 1)
    return {'sweeps': len(gaps),
            'node_robust_spread_pct': {n: round(100 * robust_spread(v), 2)
                                       for n, v in per_node.items()},
            'node_median': {n: round(statistics.median(v), 1)
                            for n, v in per_node.items()},
            'gap_pct': summary([100 * g for g in gaps])}


def summary(values):
    '''Median, 95th percentile and maximum of *values* (rounded).'''
    if not values:
        return None
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return {'n': len(values), 'median': round(statistics.median(values), 2),
            'p95': round(p95, 2), 'max': round(max(values), 2),
            'min': round(min(values), 2)}


def rescore(scores, min_spread):
    '''A sweep's :class:`~nodes.NodeScore` list scored again with
    another floor of the spread.'''
    return nodes.score_nodes({n.node: [n.value] for n in scores},
                             min_spread=min_spread)


def sweep_rates(runs, slowed):
    '''Per floor and threshold: the sweeps in which any node is flagged,
    and in which the slowed node alone is; the lowest score, and the
    slowed node's score and deviation at :data:`nodes.MIN_SPREAD`.'''
    scored = [scores for scores, *_ in runs if scores]
    rates = {}
    for floor in MIN_SPREADS:
        sweeps = [rescore(s, floor) for s in scored]
        for threshold in THRESHOLDS:
            flagged = {frozenset(n.node for n in s if n.slow(threshold))
                       for s in sweeps}
            rates[f'floor {floor:g}, threshold {threshold:g}'] = {
                'any_flagged': sum(any(n.slow(threshold) for n in s)
                                   for s in sweeps),
                'slowed_node_alone_flagged': sum(
                    {n.node for n in s if n.slow(threshold)} == {slowed}
                    for s in sweeps),
                'flag_sets': sorted(sorted(f) for f in flagged if f)}
    slow_scores = [n for s in scored for n in s if n.node == slowed]
    lowest, weakest = {}, {}
    for floor in MIN_SPREADS:
        rescored = [rescore(s, floor) for s in scored]
        lowest[f'floor {floor:g}'] = round(min(
            (n.score for s in rescored for n in s), default=0), 2)
        weakest[f'floor {floor:g}'] = round(max(
            (n.score for s in rescored for n in s if n.node == slowed),
            default=0), 2)
    declared = sorted({noise for scores, _, noise in runs
                       if scores and noise is not None})
    return {'sweeps': len(scored), 'rates': rates,
            'declared_noise_pct': declared,
            'any_flagged_at_declared_noise': sum(
                any(n.slow() for n in s) for s in scored),
            'slowed_node_alone_flagged_at_declared_noise': sum(
                {n.node for n in s if n.slow()} == {slowed}
                for s in scored),
            'lowest_score_by_floor': lowest,
            'slowed_node_highest_score_by_floor': weakest,
            'lowest_score': summary([min(n.score for n in s)
                                     for s in scored]),
            'slowed_node_score': summary([n.score for n in slow_scores]),
            'slowed_node_deviation_pct': summary(
                [100 * n.deviation for n in slow_scores])}


def rank_rates(runs, slowed):
    '''The 2-node runs' spread (the ranks' records), and the rank the
    check names from them at :data:`device_check.RANK_SPREAD_NOISE_PCT`.'''
    pairs = [records for _, records, _ in runs if records]
    spreads = [device_check.rank_compute_spread(r)[0] for r in pairs]
    named = [device_check.slowest_rank(r) for r in pairs]
    return {'runs': len(pairs), 'spread_pct': summary(spreads),
            'named_any': sum(bool(n) for n in named),
            'named_slowed_node': sum(bool(slowed) and f' on {slowed},' in n
                                     for n in named),
            'threshold_pct': device_check.RANK_SPREAD_NOISE_PCT,
            'runs_above_threshold_pct': {
                str(t): sum(s > t for s in spreads)
                for t in RANK_THRESHOLDS}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out_dir')
    parser.add_argument('--json')
    args = parser.parse_args()
    found = sessions(args.out_dir)
    result = {'min_spread': nodes.MIN_SPREAD, 'threshold': nodes.THRESHOLD,
              'noise': sweep_noise(found.get('unslowed', [])), 'labels': {}}
    for label, runs in sorted(found.items()):
        slowed = label.split('-')[1] if label.startswith('slow-') else None
        result['labels'][label] = {'sweeps': sweep_rates(runs, slowed),
                                   'two_nodes': rank_rates(runs, slowed)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json, 'w') as fp:
            fp.write(text + '\n')


if __name__ == '__main__':
    main()
