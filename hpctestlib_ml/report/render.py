"""The report as text (terminal) and as one self-contained HTML page (the
figures embedded as data URIs)."""
import base64
import html
import os
import time

TABLE_COLUMNS = ('workload', 'system:partition', 'case', 'size', 'metric',
                 'runs', 'fails', 'latest', 'median', 'min', 'max',
                 'MFU %', 'J/sample', 'change', 'ref', 'latest result')


def _fmt(value, digits=4):
    if value is None:
        return '-'
    if isinstance(value, float):
        return f'{value:.{digits}g}'
    return str(value)


def _change(row):
    '''The change cell: a flagged change with its interval and date, else
    the drift of the last N against the N before (not significant).'''
    if row.flagged:
        found = row.detected
        return (f'{100 * found.effect:+.1f}% [{100 * found.low:+.1f}, '
                f'{100 * found.high:+.1f}] since {_day(found.when)} !')
    return '-' if row.change is None else f'{100 * row.change:+.1f}%'


def _day(seconds):
    return time.strftime('%Y-%m-%d %H:%M', time.gmtime(seconds))


def table_cells(rows):
    return [(r.workload, r.where, _case(r.case), r.size,
             f'{r.metric} ({r.unit})' if r.unit else r.metric, str(r.runs),
             str(r.failures), _fmt(r.latest), _fmt(r.median),
             _fmt(r.minimum), _fmt(r.maximum), _fmt(r.mfu, 3),
             _fmt(r.energy, 3), _change(r), _fmt(r.ref) if r.ref else '-',
             r.status) for r in rows]


def change_lines(rows):
    '''What changed, worst first: one line per flagged change (effect, 95 %
    interval, p, when it began, how many runs on each side) and the
    provenance that changed with it; then the events that are not shifts
    (a change of spread, a case gone silent, the newest run odd), one
    line each.'''
    flagged = sorted((r for r in rows if r.flagged),
                     key=lambda r: (not r.detected.worse,
                                    -abs(r.detected.effect)))
    out = []
    if not flagged:
        out.append('No significant change: every case is within its own '
                   'noise (change points at p < 0.001 and at least 5%).')
    for r in flagged:
        found = r.detected
        out.append(f'{r.workload} {r.where} {_case(r.case)} [{r.size}]: '
                   f'{r.metric} {found.describe()}, since '
                   f'{_day(found.when)} ({found.before} runs before, '
                   f'{found.after} after)')
        out.append(f'    what changed: {r.cause}')
        if r.component:
            out.append(f'    {r.component}')
    for r in rows:
        if r.impossible:
            out.append(f'{r.workload} {r.where} {_case(r.case)} [{r.size}]: '
                       f'{r.metric}: {r.impossible}')
        for event in r.others:
            out.append(f'{r.workload} {r.where} {_case(r.case)} [{r.size}]: '
                       f'{r.metric} {event.describe()}')
    return out


def _case(display_name):
    return ' '.join(display_name.split(' %')[1:]) or display_name


def text_table(header, cells):
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
              for i, h in enumerate(header)]
    line = lambda cs: '  '.join(c.ljust(w) for c, w in zip(cs, widths))
    return '\n'.join([line(header), line(['-' * w for w in widths])] +
                     [line(c) for c in cells])


def score_lines(score, baseline_name, stats, baseline):
    out = [f'Score against baseline {baseline_name!r} (ratio > 1: better; '
           f'perf_adj = median x (1 - rel. std) x (1 - fails/runs)):']
    cells = []
    for key, ratio in sorted(score.per_case.items()):
        workload, name, size = key.split('|')
        here, base = stats[key], baseline[key]
        cells.append((workload, _case(name), size, here.metric,
                      _fmt(here.perf), _fmt(here.rel_std, 2),
                      f'{here.failures}/{here.runs}', _fmt(base.perf),
                      f'{ratio:.3f}'))
    out.append(text_table(('workload', 'case', 'size', 'metric', 'median',
                           'rel.std', 'fails', 'baseline', 'ratio'), cells))
    out.append('')
    for workload, value in sorted(score.per_workload.items()):
        note = (' (component: not in the overall score)'
                if workload in score.components else '')
        out.append(f'  {workload:<16} {value:.3f}{note}')
    overall = '-' if score.overall is None else f'{score.overall:.3f}'
    out.append(f'  {"overall":<16} {overall}  (weighted geometric mean)')
    if score.missing:
        out.append(f'  not comparable here ({len(score.missing)}): ' +
                   ', '.join(k.replace('|', ' ') for k in score.missing[:8]) +
                   (' ...' if len(score.missing) > 8 else ''))
    return out


def comparison_lines(rows, label_a, label_b):
    cells = [(k.split('|')[0], _case(k.split('|')[1]), k.split('|')[2],
              a.metric, _fmt(a.perf), _fmt(b.perf), f'{ratio:.3f}')
             for k, a, b, ratio in rows]
    return [f'Comparison {label_b} / {label_a} (adjusted performance):',
            text_table(('workload', 'case', 'size', 'metric', label_a,
                        label_b, 'ratio'), cells)]


#: Columns of the slow nodes' table (:mod:`.nodes`).
NODE_COLUMNS = ('workload', 'system:partition', 'case', 'size', 'metric',
                'node', 'value', 'others (median)', 'vs others', 'score',
                'nodes')
#: Columns of the slowest ranks' table.
RANK_COLUMNS = ('workload', 'system:partition', 'case', 'size', 'run',
                'slowest rank')


def _hours(seconds):
    return f'{seconds / 3600:g} h'


def slow_node_section(sweeps, ranks, threshold, min_spread, window):
    '''The "Slow nodes" section's parts (paragraphs, and (columns, cells)
    tables: :func:`section_lines`, :func:`html_page`) of
    :func:`.nodes.sweeps` *sweeps* and :func:`.nodes.slow_ranks` *ranks*;
    [] where there is neither.'''
    if not sweeps and not ranks:
        return []
    parts = [f'Each node\'s headline figure in a case\'s latest '
             f'{_hours(window)} against the partition\'s other nodes: the '
             f'modified z-score 0.6745 (x - median) / MAD of the others '
             f'(Iglewicz & Hoaglin 1993), their spread (MAD / 0.6745) at '
             f'least {100 * min_spread:g} % of their median, below 0 '
             f'slower; slow below -{threshold:g} and, where the partition '
             f'declares how far its figures move with nothing changed '
             f'(extras[\'reference_noise_pct\']), slower than the others '
             f'by more than that.']
    cells = [(s.workload, s.where, _case(s.case), s.size,
              f'{s.metric} ({s.unit})' if s.unit else s.metric, n.node,
              _fmt(n.value), _fmt(n.others), f'{100 * n.deviation:+.1f} %',
              f'{n.score:.1f}', str(len(s.nodes)))
             for s in sweeps for n in s.slow(threshold)]
    if cells:
        parts.append((NODE_COLUMNS, cells))
    parts.append(_sweep_summary(sweeps, threshold))
    if ranks:
        parts.append('Multi-node runs whose slowest rank computed beyond '
                     'the noise (the check\'s slowest_rank):')
        parts.append((RANK_COLUMNS, [
            (r.workload, r.where, _case(r.name),
             r.params.get('resolved_size', ''), _day(r.time), text)
            for r, text in ranks]))
    return parts


#: Columns of the wrong answers' table (:mod:`.wrong_answers`).
ANSWER_COLUMNS = ('workload', 'system:partition', 'case', 'run', 'node',
                  'rank', 'finding')


def wrong_answer_section(compared, window):
    '''The "Wrong answers" section's parts (as :func:`slow_node_section`'s)
    of :func:`.wrong_answers.wrong_answers` *compared*; [] where no run
    compared answers.'''
    if not compared.runs:
        return []
    parts = [f'The runs in each case\'s latest {_hours(window)} that '
             f'compared their ranks\' answers (the same computation on '
             f'every rank, digested): a node named here computed a wrong '
             f'answer without an error (silent data corruption, triage '
             f'category hardware): take it out of service and run the '
             f'vendor\'s diagnostics on it.']
    cells = [(f.run.workload, f.run.where, _case(f.run.name), _day(f.run.time),
              node, str(rank), f.line)
             for f in compared.findings for rank, node in f.suspects]
    if cells:
        parts.append((ANSWER_COLUMNS, cells))
    named = compared.named
    nodes = compared.nodes
    where = (f'{len(nodes)} nodes ({", ".join(nodes[:8])}'
             f'{" ..." if len(nodes) > 8 else ""})' if nodes else
             'nodes not logged')
    if named:
        parts.append(f'{compared.runs} run(s) compared answers on {where}; '
                     f'wrong answers on: ' + ', '.join(
                         f'{node} ({runs} run{"s" if runs > 1 else ""})'
                         for node, runs in sorted(named.items())) + '.')
    else:
        parts.append(f'{compared.runs} run(s) compared answers on {where}: '
                     f'no wrong answer.')
    return parts


def section_lines(parts):
    '''A section's parts (paragraphs and (columns, cells) tables) as
    terminal lines.'''
    return [part if isinstance(part, str) else text_table(*part)
            for part in parts]


def _sweep_summary(sweeps, threshold):
    '''One line: how many cases were swept on how many nodes, and which
    were slow.'''
    nodes = sorted({n.node for s in sweeps for n in s.nodes})
    slow = sorted({n.node for s in sweeps for n in s.slow(threshold)})
    failed = sorted({n for s in sweeps for n in s.failed})
    if not sweeps:
        return 'No node sweep in the runs (a case run alone on two nodes '\
               'or more: --distribute=all).'
    lowest = min(n.score for s in sweeps for n in s.nodes)
    text = (f'{len(sweeps)} case(s) swept on {len(nodes)} nodes; slow: '
            f'{", ".join(slow)}.' if slow else
            f'{len(sweeps)} case(s) swept on {len(nodes)} nodes '
            f'({", ".join(nodes[:8])}{" ..." if len(nodes) > 8 else ""}): '
            f'no slow node (lowest score {lowest:.1f}).')
    quiet = [f'{n.node} {100 * n.deviation:+.1f} % ({s.where}, noise '
             f'{100 * s.noise:g} %)' for s in sweeps for n in s.nodes
             if n.score < -threshold and n.within_noise]
    if quiet:
        text += (f' Below -{threshold:g} but within its partition\'s '
                 f'declared noise: {", ".join(quiet)}.')
    if failed:
        text += f' Failed every run: {", ".join(failed)}.'
    return text


def _html_table(header, cells):
    head = ''.join(f'<th>{html.escape(h)}</th>' for h in header)
    body = ''.join('<tr>' + ''.join(f'<td>{html.escape(c)}</td>' for c in row)
                   + '</tr>' for row in cells)
    return f'<table><tr>{head}</tr>{body}</table>'


def html_page(title, summary, table_rows, text_sections, images,
              table_sections=()):
    '''The whole report in one file: tables, text sections, sections of
    paragraphs and tables (*table_sections*: (heading, parts), e.g.
    :func:`slow_node_section`'s parts), PNGs inlined.'''
    changed = change_lines(table_rows)
    parts = [f'<h1>{html.escape(title)}</h1>',
             f'<p>{html.escape(summary)}</p>',
             '<h2>What changed</h2>',
             f'<pre class="changes">{html.escape(chr(10).join(changed))}'
             f'</pre>',
             '<h2>Results</h2>',
             _html_table(TABLE_COLUMNS, table_cells(table_rows))]
    for heading, section in table_sections:
        parts.append(f'<h2>{html.escape(heading)}</h2>')
        parts += [f'<p>{html.escape(part)}</p>' if isinstance(part, str)
                  else _html_table(*part) for part in section]
    for heading, lines in text_sections:
        parts.append(f'<h2>{html.escape(heading)}</h2><pre>'
                     f'{html.escape(chr(10).join(lines))}</pre>')
    if images:
        parts.append('<h2>Figures</h2>')
    for path in images:
        with open(path, 'rb') as fp:
            data = base64.b64encode(fp.read()).decode()
        parts.append(f'<figure><img alt="{html.escape(os.path.basename(path))}"'
                     f' src="data:image/png;base64,{data}"><figcaption>'
                     f'{html.escape(os.path.basename(path))}</figcaption>'
                     f'</figure>')
    style = ('body{font-family:sans-serif;margin:2em}table{border-collapse:'
             'collapse;font-size:12px}td,th{border:1px solid #ccc;padding:'
             '2px 6px;text-align:left}img{max-width:100%}pre{font-size:12px}')
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>'
            f'{html.escape(title)}</title><style>{style}</style></head><body>'
            + ''.join(parts) +
            f'<p><small>hpcml report, {time.strftime("%Y-%m-%d %H:%M %Z")}'
            f'</small></p></body></html>')
