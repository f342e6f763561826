"""A performance record as time series, and back.

Each run (one perflog line) becomes, at its job's completion time (ms):

- ``hpcml_<figure>``: each performance value, its unit in the label
  ``unit``;
- ``hpcml_ref_<figure>``, ``hpcml_lower_thres_<figure>``,
  ``hpcml_upper_thres_<figure>``: its reference and thresholds, as
  companion series (only where the check has them);
- ``hpcml_result``: 1 for a run that passed, 0 for one that failed (a
  failed run may have no figure).

Labels (:data:`LABELS`): ``system``, ``partition``, ``environ``,
``check`` (the test class), ``display_name``, the case's parameters, the
node list (``job_nodelist``) and the provenance fields, as the perflogs
log them; the fields logged empty are named in the label ``empty`` of
``hpcml_result`` (an empty label is no label, in Prometheus as here, and a
field not logged at all, by an older perflog header, says nothing about a
change: :mod:`hpctestlib_ml.report.causes`). Labels, not metric names, hold what tells series apart, and
a unit belongs with the series it describes, as VictoriaMetrics' data
model has it ("Key concepts": a series is a metric name plus labels;
its docs advise Prometheus' naming, where the unit is part of what a
series means and never a value's).
"""
import json
import re

from hpctestlib_ml import perflog_fields

#: Every series' name starts with this.
PREFIX = 'hpcml_'
#: The companion series of each figure: perflog part -> name prefix.
COMPANIONS = {'ref': 'ref_', 'lower_thres': 'lower_thres_',
              'upper_thres': 'upper_thres_'}
#: The run fields sent as labels (beside system, partition, environ,
#: check, display_name).
LABELS = (perflog_fields.names(perflog_fields.CASE)
          + perflog_fields.names(perflog_fields.PROVENANCE)
          + ('slowest_rank',))
_NAME = re.compile(r'[^a-zA-Z0-9_]')


def metric_name(figure):
    return PREFIX + _NAME.sub('_', figure)


def run_labels(system, partition, environ, display_name, fields):
    '''The labels of a run: its place, its name and *fields* (name ->
    text; empty ones left out).'''
    labels = {'system': system, 'partition': partition, 'environ': environ,
              'check': display_name.split()[0] if display_name else '',
              'display_name': display_name}
    empty = []
    for name in LABELS:
        value = fields.get(name)
        if value == '':
            empty.append(name)
        elif value is not None:
            labels[name] = str(value)
    labels = {k: v for k, v in labels.items() if v not in (None, '')}
    if empty:
        labels['empty'] = ','.join(empty)
    return labels


def import_lines(labels, when, result, figures):
    '''VictoriaMetrics' JSON-line import of one run: *figures* name ->
    (value, unit, ref, lower, upper), *when* Unix seconds.'''
    stamp = [int(round(when * 1000))]
    out = [{'metric': {'__name__': PREFIX + 'result', **labels},
            'values': [1 if result == 'pass' else 0], 'timestamps': stamp}]
    labels = {k: v for k, v in labels.items() if k != 'empty'}
    for name, (value, unit, ref, lower, upper) in figures.items():
        if value is None:
            continue
        series = {'__name__': metric_name(name), **labels}
        out.append({'metric': {**series, 'unit': unit or ''}
                    if unit else series,
                    'values': [float(value)], 'timestamps': stamp})
        for part, number in (('ref', ref), ('lower_thres', lower),
                             ('upper_thres', upper)):
            if number is None or (part == 'ref' and not number):
                continue
            companion = {'__name__': PREFIX + COMPANIONS[part] +
                         _NAME.sub('_', name), **labels}
            out.append({'metric': companion, 'values': [float(number)],
                        'timestamps': stamp})
    return ''.join(json.dumps(line, separators=(',', ':')) + '\n'
                   for line in out)


def records_of(exported):
    '''The runs of VictoriaMetrics' export (JSON lines, as
    :func:`import_lines` sent them), oldest first, each a dict: time,
    system, partition, display_name, result, params (the :data:`LABELS`
    it has) and figures (name -> value, unit, ref, lower_thres,
    upper_thres). The report makes them runs
    (:func:`hpctestlib_ml.tsdb.read.runs_of`).'''
    runs = {}
    for text in exported.splitlines():
        if not text.strip():
            continue
        line = json.loads(text)
        labels = dict(line['metric'])
        name = labels.pop('__name__')
        unit = labels.pop('unit', '')
        empty = labels.pop('empty', None)
        key = tuple(sorted(labels.items()))
        for value, stamp in zip(line['values'], line['timestamps']):
            run = runs.get((key, stamp))
            if run is None:
                run = runs[(key, stamp)] = {'labels': labels, 'time':
                                            stamp / 1000, 'figures': {},
                                            'result': 'pass'}
            _put(run, name, unit, value)
            if empty:
                run['empty'] = empty.split(',')
    return sorted((_record(r) for r in runs.values()),
                  key=lambda r: r['time'])


def _put(run, name, unit, value):
    figure = name[len(PREFIX):]
    if figure == 'result':
        run['result'] = 'pass' if value else 'fail'
        return
    for part, prefix in COMPANIONS.items():
        if figure.startswith(prefix):
            run['figures'].setdefault(figure[len(prefix):], {})[part] = value
            return
    run['figures'].setdefault(figure, {}).update(value=value, unit=unit)


def _record(found):
    labels = found['labels']
    params = {name: labels[name] for name in LABELS if name in labels}
    params.update((name, '') for name in found.get('empty', ()))
    return {'time': found['time'], 'system': labels.get('system', ''),
            'partition': labels.get('partition', ''),
            'display_name': labels.get('display_name', ''),
            'result': found['result'], 'params': params,
            'figures': {name: parts for name, parts in
                        found['figures'].items() if 'value' in parts}}
