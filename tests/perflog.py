"""Read and write the suite's perflogs by field name (tests' helpers)."""
import csv
import time


def read_perflog(path):
    '''Rows of a '|'-separated ReFrame perflog as dicts keyed by its
    header; every row must have the header's fields (a case that logs other
    figures than the file's first writes lines the report cannot read).'''
    with open(path, newline='') as fp:
        rows = list(csv.reader(fp, delimiter='|'))
    header, *body = rows
    for number, row in enumerate(body, 2):
        assert len(row) == len(header), (
            f'{path}:{number}: {len(row)} fields, its header {len(header)}')
    return [dict(zip(header, row)) for row in body]


def suite_header(metrics):
    '''The header ReFrame writes for the suite's perflog format
    (hpctestlib_ml.siteconfig) with performance variables *metrics*.'''
    from hpctestlib_ml import perflog_fields
    return '|'.join(
        [*perflog_fields.names()]
        + [f'{m}_{part}' for m in metrics
           for part in perflog_fields.METRIC_PARTS])


def suite_line(when, display_name, where, fields, metrics, result='pass',
               nodelist='localhost'):
    '''One result as the suite's perflog format writes it: *fields* are
    the logged test attributes (the others empty), *metrics* name ->
    (value, unit), without references; *nodelist* the job's nodes
    (``n1,n2``).'''
    from hpctestlib_ml import perflog_fields
    system, partition = where.split(':')
    stamp = time.strftime('%Y-%m-%dT%H:%M:%S+0000', time.gmtime(when))
    values = [part for value, unit in metrics.values()
              for part in (f'{value:g}', unit, '0', 'None', 'None')]
    given = {'job_completion_time': stamp, 'version': '4.10.4',
             'display_name': display_name, 'system': system,
             'partition': partition, 'environ': 'default',
             'job_nodelist': nodelist, 'result': result, **fields}
    return '|'.join([*(str(given.get(name, ''))
                       for name in perflog_fields.names()), *values])


def write_suite_perflog(path, lines, metrics):
    '''A perflog file of *lines* (:func:`suite_line`) under its header, at
    ``<path>``, as ReFrame writes it (directories made).'''
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('\n'.join([suite_header(metrics), *lines]) + '\n')
