#!/usr/bin/env python3
"""How well the regression loop works on this machine's real noise.

Reads a history of real, unchanged runs (bench/history_runs.sh writes one)
and measures, per case and headline metric:

- noise: robust spread (1.4826 x MAD / median), coefficient of variation,
  min/max over median; loss curves: largest deviation between runs;
- false alarms of ``hpcml report``: the change detection run on every
  prefix of at least --min-prefix runs of the real, unchanged history (as a
  nightly report would have seen it each night): how many flag a change;
- false alarms of ``hpcml references``: each run checked against the
  reference and threshold derived from the --last runs before it;
- power: histories drawn from the case's measured values (a smoothed
  bootstrap: each draw is a measured value plus a little Gaussian noise of
  Silverman's bandwidth, so that 20 values do not repeat into ties),
  N runs before and M after a slowdown of 5, 10 and 20 % injected at a
  known run: the share detected (flagged and in the slower direction) for
  M = 3, 5, 10, and how far the dated change is from the true one; and the
  share of single slowed runs the derived references fail; with 0 %, the
  same draws give the false-alarm rate of histories longer than the real
  one.

    bench/regression_bench.py VAR_DIR [--json FILE]
"""
import argparse
import json
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from hpctestlib_ml.history_refs import derive, lookup     # noqa: E402
from hpctestlib_ml import changes  # noqa: E402
from hpctestlib_ml.report import analysis, history  # noqa: E402

#: 0: no slowdown, any flag is a false alarm.
SLOWDOWNS = (0.0, 0.05, 0.10, 0.20)
RUNS_AFTER = (3, 5, 10)


def cases(var_dir):
    data = history.read_perflogs([os.path.join(var_dir, 'perflogs')])
    weights = analysis.load_weights()
    out = {}
    for (workload, where, *_), runs in analysis.group(
            data.runs, lambda r: r.case_here).items():
        chosen = analysis.headline(workload, runs, weights)
        ok = [r for r in runs if r.result == 'pass'
              and chosen.metric in r.metrics]
        out[f'{runs[-1].name} @{where}'] = (chosen, ok, len(runs))
    return out


def noise(values):
    center = statistics.median(values)
    return {'runs': len(values), 'median': center,
            'robust_spread_pct': 100 * derive.robust_spread(values),
            'cv_pct': 100 * statistics.pstdev(values) /
            statistics.fmean(values),
            'min_pct': 100 * (min(values) / center - 1),
            'max_pct': 100 * (max(values) / center - 1)}


def loss_determinism(runs):
    curves = [lookup.parse_loss_curve(r.params.get('loss_curve'))
              for r in runs]
    curves = [c for c in curves if c]
    if len(curves) < 2:
        return None
    first = curves[0]
    return max(abs(a - b) for c in curves for a, b in zip(c, first))


def report_false_alarms(values, higher, min_prefix):
    flagged = []
    for n in range(min_prefix, len(values) + 1):
        found = changes.latest_change(values[:n], list(range(n)), higher)
        if found and found.flagged:
            flagged.append(n)
    return {'prefixes': len(values) - min_prefix + 1, 'flagged': flagged}


def reference_false_alarms(values, higher, last):
    '''Each run against the reference of the *last* runs before it.'''
    checked = failed = 0
    for i in range(last, len(values)):
        ref, tolerance, *_ = derive.threshold(values[i - last:i],
                                              1 if higher else -1)
        checked += 1
        ratio = values[i] / ref - 1
        failed += (ratio < -tolerance) if higher else (ratio > tolerance)
    return {'checked': checked, 'failed': failed}


def smoothed_draw(values, rng):
    '''A draw from the measured values, smoothed (Silverman's bandwidth):
    resampling 20 values alone repeats them, and ties make a history look
    quieter than the noise that made it.'''
    sd = statistics.pstdev(values)
    q = statistics.quantiles(values, n=4)
    spread = min(sd, (q[2] - q[0]) / 1.34) or sd
    bandwidth = 0.9 * spread * len(values) ** -0.2
    return rng.choice(values) + rng.gauss(0.0, bandwidth)


def power(values, higher, before, trials, seed):
    rng = random.Random(seed)
    draw = lambda: smoothed_draw(values, rng)          # noqa: E731
    table = {}
    for slowdown in SLOWDOWNS:
        factor = 1 - slowdown if higher else 1 / (1 - slowdown)
        for after in RUNS_AFTER:
            detected, offsets = 0, []
            for _ in range(trials):
                series = ([draw() for _ in range(before)] +
                          [draw() * factor for _ in range(after)])
                found = changes.latest_change(series,
                                              list(range(len(series))),
                                              higher)
                if found and found.flagged and (found.worse or
                                                not slowdown):
                    detected += 1
                    offsets.append(abs(found.index - before))
            table[f'{int(100 * slowdown)}%/{after}'] = {
                'detected_pct': 100 * detected / trials,
                'median_date_error_runs': (statistics.median(offsets)
                                           if offsets else None),
                'dated_exactly_pct': (100 * offsets.count(0) / len(offsets)
                                      if offsets else None)}
        # References: one slowed run against the last 10 unchanged ones.
        caught = 0
        for _ in range(trials):
            history_values = [draw() for _ in range(10)]
            ref, tolerance, *_ = derive.threshold(history_values,
                                                  1 if higher else -1)
            ratio = draw() * factor / ref - 1
            caught += (ratio < -tolerance) if higher else (ratio > tolerance)
        table[f'{int(100 * slowdown)}%/reference'] = {
            'caught_pct': 100 * caught / trials}
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('var_dir')
    parser.add_argument('--json', metavar='FILE')
    parser.add_argument('--trials', type=int, default=200)
    parser.add_argument('--before', type=int, default=20,
                        help='runs before the injected slowdown')
    parser.add_argument('--min-prefix', type=int, default=10)
    args = parser.parse_args(argv)
    results = {}
    for name, (chosen, runs, total) in sorted(cases(args.var_dir).items()):
        values = [r.metrics[chosen.metric].value for r in runs]
        if len(values) < args.min_prefix:
            print(f'{name}: {len(values)} passing runs, '
                  f'{args.min_prefix} needed')
            continue
        higher = chosen.higher_is_better
        result = {
            'metric': chosen.metric, 'failed_runs': total - len(runs),
            'noise': noise(values),
            'loss_curve_max_deviation': loss_determinism(runs),
            'report_false_alarms': report_false_alarms(values, higher,
                                                       args.min_prefix),
            'reference_false_alarms': reference_false_alarms(values, higher,
                                                             10),
            'power': power(values, higher, args.before, args.trials, 1),
        }
        results[name] = result
        n = result['noise']
        print(f'\n{name}: {chosen.metric}, {n["runs"]} runs, median '
              f'{n["median"]:.4g}, robust spread {n["robust_spread_pct"]:.1f}'
              f'%, CV {n["cv_pct"]:.1f}%, range {n["min_pct"]:+.1f}%..'
              f'{n["max_pct"]:+.1f}%; loss curves: max deviation '
              f'{result["loss_curve_max_deviation"]}')
        fa = result['report_false_alarms']
        print(f'  report false alarms: {len(fa["flagged"])} of '
              f'{fa["prefixes"]} nightly prefixes {fa["flagged"] or ""}')
        ra = result['reference_false_alarms']
        print(f'  reference false alarms: {ra["failed"]} of '
              f'{ra["checked"]} runs')
        for key, row in result['power'].items():
            print(f'  {key:>14}: ' + ', '.join(
                f'{k} {v:.3g}' if isinstance(v, float) else f'{k} {v}'
                for k, v in row.items()))
    if args.json:
        with open(args.json, 'w') as fp:
            json.dump(results, fp, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
