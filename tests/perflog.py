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
    from hpctestlib_ml.siteconfig import PERFLOG_FIELDS
    return '|'.join(
        ['job_completion_time', 'version', 'display_name', 'system',
         'partition', 'environ', *PERFLOG_FIELDS, 'job_nodelist', 'result']
        + [f'{m}_{part}' for m in metrics for part in
           ('value', 'unit', 'ref', 'lower_thres', 'upper_thres')])


def suite_line(when, display_name, where, fields, metrics, result='pass',
               nodelist='localhost'):
    '''One result as the suite's perflog format writes it: *fields* are
    the logged test attributes (the others empty), *metrics* name ->
    (value, unit), without references; *nodelist* the job's nodes
    (``n1,n2``).'''
    from hpctestlib_ml.siteconfig import PERFLOG_FIELDS
    system, partition = where.split(':')
    stamp = time.strftime('%Y-%m-%dT%H:%M:%S+0000', time.gmtime(when))
    values = [part for value, unit in metrics.values()
              for part in (f'{value:g}', unit, '0', 'None', 'None')]
    return '|'.join(
        [stamp, '4.10.4', display_name, system, partition, 'default',
         *(str(fields.get(f, '')) for f in PERFLOG_FIELDS), nodelist,
         result, *values])


def write_suite_perflog(path, lines, metrics):
    '''A perflog file of *lines* (:func:`suite_line`) under its header, at
    ``<path>``, as ReFrame writes it (directories made).'''
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('\n'.join([suite_header(metrics), *lines]) + '\n')
