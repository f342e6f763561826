"""The report's figures (matplotlib, PNG): the headline metric over time per
system:partition with its reference band and its flagged change (dotted
red), scaling curves with ideal scaling and parallel efficiency, and a
comparison of two result sets."""
import os
import statistics

from hpctestlib_ml.report.analysis import group, headline

#: Cases drawn per workload in the time-series figure (the most-run first).
MAX_PANELS = 9


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path):
    '''Write *fig* to *path* (PNG, labels kept inside) and free it.'''
    import matplotlib.pyplot as plt
    fig.savefig(path, dpi=90, bbox_inches='tight')
    plt.close(fig)
    return path


def _short(display_name):
    '''``MMoCLIP %scale=1_proc %launch_mode=torchrun`` -> its parameters.'''
    parts = display_name.split(' %')
    return ' '.join(parts[1:]) or parts[0]


def timeseries(runs, headlines, out_dir, rows=()):
    '''One PNG per workload: a panel per case, a line per
    system:partition, failures as red crosses on the time axis, the
    reference band where the results carry one, and the flagged change of
    the report's *rows* (:func:`~.analysis.table`). Returns the paths.'''
    flagged = {(r.where, r.case, r.size): r.detected for r in rows
               if r.flagged}
    plt = _pyplot()
    paths = []
    for workload, work_runs in sorted(group(runs,
                                            lambda r: r.workload).items()):
        chosen = headline(workload, work_runs, headlines)
        if chosen is None:
            continue
        cases = group(work_runs, lambda r: r.case[1:])
        ranked = sorted(cases.items(), key=lambda kv: -len(kv[1]))
        ranked = ranked[:MAX_PANELS]
        cols = min(3, len(ranked))
        rows = -(-len(ranked) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.2 * rows),
                                 squeeze=False)
        for ax, ((name, size), case_runs) in zip(axes.flat, ranked):
            unit = ''
            for where, runs_here in sorted(group(case_runs,
                                                 lambda r: r.where).items()):
                ok = [r for r in runs_here if r.result == 'pass'
                      and chosen.metric in r.metrics]
                times = [_date(r.time) for r in ok]
                values = [r.metrics[chosen.metric].value for r in ok]
                line, = ax.plot(times, values, marker='.', label=where)
                failed = [_date(r.time) for r in runs_here
                          if r.result != 'pass']
                if failed:
                    ax.plot(failed, [0] * len(failed), 'x', color='red',
                            label=f'{where} failed')
                if ok:
                    latest = ok[-1].metrics[chosen.metric]
                    unit = latest.unit
                    if latest.ref:
                        low = latest.ref * (1 + (latest.lower or 0))
                        high = (latest.ref * (1 + latest.upper)
                                if latest.upper is not None else
                                max(values + [latest.ref]))
                        ax.axhspan(low, high, alpha=0.15,
                                   color=line.get_color())
                        ax.axhline(latest.ref, ls='--', lw=0.8,
                                   color=line.get_color())
                found = flagged.get((where, name, size))
                if found:
                    ax.axvline(_date(found.when), color='red', ls=':',
                               lw=1.2, label=f'{where} change '
                               f'{100 * found.effect:+.0f}%')
            _pad_time_axis(ax, [r.time for r in case_runs])
            ax.set_title(f'{_short(name)} [{size}]', fontsize=8)
            ax.set_ylabel(f'{chosen.metric} ({unit})', fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6)
            fig.autofmt_xdate()
        for ax in list(axes.flat)[len(ranked):]:
            ax.axis('off')
        fig.suptitle(f'{workload}: {chosen.metric} over time', fontsize=10)
        paths.append(_save(fig, os.path.join(out_dir,
                                             f'timeseries_{workload}.png')))
    return paths


def _pad_time_axis(ax, times):
    '''Limits around the runs: matplotlib puts a single date in the middle
    of a four-year axis, and two runs minutes apart at its ends.'''
    if not times:
        return
    first, last = min(times), max(times)
    pad = max(0.08 * (last - first), 1800.0)
    ax.set_xlim(_date(first - pad), _date(last + pad))


def _date(t):
    import datetime
    return datetime.datetime.fromtimestamp(t)


def scaling_points(runs, metric):
    '''{ranks: median value} of passed runs.'''
    by_ranks = group([r for r in runs if r.result == 'pass'
                      and metric in r.metrics],
                     lambda r: r.param_int('num_nodes') *
                     r.param_int('procs_per_node'))
    return {n: statistics.median(r.metrics[metric].value for r in rs)
            for n, rs in sorted(by_ranks.items())}


def scaling(runs, headlines, out_dir):
    '''One PNG per workload with rate metrics run at more than one scale:
    median throughput vs ranks per system:partition, launch mode and size,
    the ideal (linear from the smallest scale) dashed, each point's
    parallel efficiency written beside it.'''
    plt = _pyplot()
    paths = []
    for workload, work_runs in sorted(group(runs,
                                            lambda r: r.workload).items()):
        chosen = headline(workload, work_runs, headlines)
        if chosen is None or not chosen.higher_is_better:
            continue
        series = {}
        for key, rs in group(work_runs, lambda r: (
                r.where, r.params.get('launch_mode', ''),
                r.params.get('resolved_size', ''))).items():
            points = scaling_points(rs, chosen.metric)
            if len(points) > 1:
                series[key] = points
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for (where, mode, size), points in sorted(series.items()):
            ranks = list(points)
            values = [points[n] for n in ranks]
            line, = ax.plot(ranks, values, marker='o',
                            label=f'{where} {mode} [{size}]')
            ideal = [values[0] * n / ranks[0] for n in ranks]
            ax.plot(ranks, ideal, ls='--', lw=0.8, color=line.get_color())
            for n, v, i in zip(ranks, values, ideal):
                ax.annotate(f'{100 * v / i:.0f}%', (n, v), fontsize=7,
                            textcoords='offset points', xytext=(4, -10))
        # Log axes where the points span decades; integer rank ticks.
        all_ranks = sorted({n for points in series.values() for n in points})
        all_values = [v for points in series.values() for v in points.values()]
        ax.set_xscale('log', base=2)
        ax.set_xticks(all_ranks, [str(n) for n in all_ranks])
        ax.minorticks_off()
        if max(all_values) > 10 * min(all_values):
            ax.set_yscale('log')
        ax.set_xlabel('ranks (nodes x ranks per node)')
        unit = next((r.metrics[chosen.metric].unit for r in work_runs
                     if chosen.metric in r.metrics), '')
        ax.set_ylabel(f'{chosen.metric} ({unit})')
        ax.set_title(f'{workload}: scaling (dashed: ideal; % = efficiency)',
                     fontsize=10)
        ax.legend(fontsize=7)
        paths.append(_save(fig, os.path.join(out_dir,
                                             f'scaling_{workload}.png')))
    return paths


def comparison(rows, label_a, label_b, path):
    '''Horizontal bars: B's adjusted performance over A's, per case.'''
    plt = _pyplot()
    rows = rows[:60]
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.2))
    names = [f'{k.split("|")[0]}: {_short(k.split("|")[1])} '
             f'[{k.split("|")[2]}]' for k, *_ in rows]
    ratios = [ratio for *_, ratio in rows]
    colours = ['tab:green' if r >= 1 else 'tab:red' for r in ratios]
    ax.barh(range(len(rows)), ratios, color=colours)
    ax.axvline(1.0, color='black', lw=0.8)
    ax.set_yticks(range(len(rows)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f'{label_b} / {label_a}, adjusted performance '
                  f'(> 1: {label_b} better)', fontsize=8)
    return _save(fig, path)
