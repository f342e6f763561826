"""Every check class's docstring ends with a Summary (ReFrame hpctestlib's
list-table) naming its parameters, variables and metrics, and every
variable of the base and its plugins is documented as hpctestlib does
(``#:`` text, ``:type:``, ``:default:``): a variable or metric added
without its line fails here."""
import ast
import importlib.util
import inspect
import sys

import pytest

from conftest import REPO
from hpctestlib_ml import plugins
from hpctestlib_ml.base import MLTrainingTest


def check_classes():
    '''The classes of checks/*.py that derive from MLTrainingTest.'''
    found = []
    for path in sorted((REPO / 'checks').glob('*.py')):
        spec = importlib.util.spec_from_file_location(
            f'_doc_check_{path.stem}', path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module      # ReFrame reads its file
        spec.loader.exec_module(module)
        found += [cls for cls in vars(module).values()
                  if inspect.isclass(cls) and issubclass(cls, MLTrainingTest)
                  and cls.__module__ == module.__name__]
    return found


CHECKS = check_classes()


def summary(doc):
    '''The Summary list-table at the end of *doc*; fails if none ends it.'''
    assert doc and '.. list-table:: Summary' in doc
    table = doc[doc.rindex('.. list-table:: Summary'):]
    assert all(line.startswith((' ', '.. list-table')) or not line.strip()
               for line in table.splitlines()), 'text after the Summary'
    return table


def own(cls):
    '''(parameters, variables, metrics) a check class has beyond
    MLTrainingTest's.'''
    params = set(cls.param_space.params) - set(MLTrainingTest.param_space
                                               .params)
    variables = (set(cls._rfm_var_space.vars) -
                 set(MLTrainingTest._rfm_var_space.vars))
    metrics = set(cls._rfm_perf_fns)
    return params, variables, metrics


def test_there_are_checks_of_every_workload():
    assert len({cls.workload for cls in CHECKS}) >= 8


@pytest.mark.parametrize('cls', CHECKS, ids=lambda c: c.__name__)
def test_each_check_ends_with_a_summary_of_what_it_has(cls):
    table = summary(inspect.getdoc(cls))
    params, variables, metrics = own(cls)
    missing = sorted(n for n in params | variables | metrics
                     if f'``{n}``' not in table)
    assert not missing, f'{cls.__name__}: Summary lacks {missing}'


def test_the_base_summary_names_every_plugin_variable_and_parameter():
    table = summary(inspect.getdoc(MLTrainingTest))
    names = {name for plugin_name in plugins.__all__
             for name in getattr(plugins, plugin_name)._rfm_var_space.vars}
    assert len(names) > 30, 'the plugins\' variables not found'
    names |= set(MLTrainingTest.param_space.params)
    missing = sorted(n for n in names if f'``{n}``' not in table)
    assert not missing, f'MLTrainingTest Summary lacks {missing}'


def documented_variables(path):
    '''[(name, the #: block above it)] of the variable() and parameter()
    assignments in a module.'''
    lines = path.read_text().splitlines()
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Assign) and
                isinstance(node.value, ast.Call) and
                getattr(node.value.func, 'id', '') in ('variable',
                                                       'parameter')):
            continue
        block, row = [], node.lineno - 2
        while row >= 0 and lines[row].strip().startswith('#:'):
            block.insert(0, lines[row].strip())
            row -= 1
        found.append((node.targets[0].id, node.value.func.id, block))
    return found


LIBRARY = sorted([*(REPO / 'hpctestlib_ml' / 'plugins').glob('*.py'),
                  *(REPO / 'hpctestlib_ml' / 'workloads').rglob('*.py')])


@pytest.mark.parametrize('path', LIBRARY, ids=lambda p: str(p.relative_to(
    REPO / 'hpctestlib_ml')))
def test_variables_are_documented_as_hpctestlib_does(path):
    for name, kind, block in documented_variables(path):
        assert block, f'{path.name}: {name} has no #: text'
        if kind == 'variable':
            assert any(':type:' in line for line in block), name
            assert any(':default:' in line for line in block), name
