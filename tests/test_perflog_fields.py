"""The perflog's columns have one home (hpctestlib_ml.perflog_fields): the
format the site configurations write is built from it, the report reads
a line written by it back whole, and no other module of the library keeps
a list of the columns."""
import ast
import re

from conftest import REPO
from hpctestlib_ml import perflog_fields
from hpctestlib_ml.report import causes, history
from perflog import suite_header, suite_line


def test_the_writer_writes_the_declared_columns():
    from hpctestlib_ml import siteconfig
    attributes = re.findall(r'%\((\w+)\)s', siteconfig._PERFLOG_FORMAT)
    names = [a[len('check_'):] if a.startswith('check_') else a
             for a in attributes]
    assert names == [*perflog_fields.names(), 'perfvalues']


def test_a_line_of_every_column_is_read_back_whole(tmp_path):
    '''Every case, provenance and result column written reaches the
    report's run, and every provenance column its list of causes.'''
    kept = perflog_fields.names(perflog_fields.CASE, perflog_fields.PROVENANCE,
                                perflog_fields.RESULT)
    fields = {name: f'{name}-x' for name in kept if name != 'job_nodelist'}
    fields['framework_versions'] = 'torch=2.5'
    fields['env_switches'] = 'NCCL_ALGO=Ring'
    path = tmp_path / 'perflogs' / 'local' / 'cpu' / 'X.log'
    path.parent.mkdir(parents=True)
    path.write_text(suite_header(['rate']) + '\n' + suite_line(
        1.7e9, 'X %scale=1_proc', 'local:cpu', fields,
        {'rate': (1.0, 'x/s')}, nodelist='n1') + '\n')
    run, = history.read_perflog(path).runs
    assert set(run.params) == set(kept)
    assert run.params['job_nodelist'] == 'n1'
    facts = causes.facts(run)
    assert {name.split('/')[0] for name in facts} == {
        'framework', 'env', *perflog_fields.names(perflog_fields.PROVENANCE)}


def column_lists(path, names):
    '''(line, names) of each literal list, tuple or set of *path* that
    holds three or more perflog columns.'''
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            found = {e.value for e in node.elts
                     if isinstance(e, ast.Constant) and e.value in names}
            if len(found) >= 3:
                yield node.lineno, sorted(found)


def test_no_other_module_lists_the_columns():
    '''siteconfig's PERFLOG_FIELDS, the history's CASE_FIELDS,
    RESULT_FIELDS and PROVENANCE_FIELDS, the causes' FIELD_ORDER and the
    settings' recorded variables each kept a copy; a column added to one
    was missing from the others.'''
    # Names that are also words of other lists (a check's own variables).
    names = set(perflog_fields.names()) - {
        'system', 'partition', 'result', 'version', 'precision', 'scale',
        'workload', 'batch_size', 'num_nodes'}
    found = [(str(path.relative_to(REPO)), line, listed)
             for path in sorted((REPO / 'hpctestlib_ml').rglob('*.py'))
             if path.name != 'perflog_fields.py'
             for line, listed in column_lists(path, names)]
    assert found == []
