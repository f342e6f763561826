"""One declaration per workload (hpctestlib_ml.registry), and the names it
declares agree with every layer: a workload is its check, its test class,
its program, its parser, its references file and its model builder, each
where the declaration says, and nothing else lists the workloads."""
import ast
import re

import pytest

from conftest import REPO, check_class
from hpctestlib_ml import registry
from hpctestlib_ml.model_info import Published

DECLARED = registry.registered()


def modules(package):
    '''The modules and packages of ``hpctestlib_ml/<package>``, but its
    ``__init__`` and the MLPerf-style workloads' shared ``mlperf``.'''
    folder = REPO / 'hpctestlib_ml' / package
    found = {p.stem for p in folder.glob('*.py')}
    found |= {p.parent.name for p in folder.glob('*/__init__.py')}
    return found - {'__init__', 'mlperf'}


def test_every_workload_module_declares_itself():
    assert modules('registry') == set(DECLARED)
    assert modules('workloads') == set(DECLARED)
    assert len(DECLARED) >= 9


@pytest.mark.parametrize('name', list(DECLARED))
def test_the_names_agree_across_layers(name):
    declared = DECLARED[name]
    cls = check_class(declared)
    suffix = 'Benchmark' if declared.kind == 'component' else 'Training'
    assert cls.__name__ == f'{declared.check}{suffix}'
    assert cls.workload == name
    leaf = REPO / 'checks' / f'{name}.py'
    classes = {node.name for node in ast.parse(leaf.read_text()).body
               if isinstance(node, ast.ClassDef)}
    assert classes == {declared.check, f'{declared.check}Container'}
    assert (REPO / 'src' / declared.program / '__main__.py').is_file()
    assert (REPO / 'config' / 'references' / f'{name}.yaml').is_file()
    assert callable(declared.parser.training_log)
    assert callable(declared.parser.extract_metrics)
    assert declared.headline.metric in cls._rfm_perf_fns
    assert declared.prepare is not None or declared.data


@pytest.mark.parametrize('name', list(DECLARED))
def test_a_workload_has_a_model_a_component_has_none(name):
    '''A training workload declares its model builder (hpcml model-info,
    MFU's FLOPs); a component benchmark is marked as one, trains no model,
    and derives from the component base (no MFU, no loss asked for).'''
    from hpctestlib_ml.base import ComponentTest
    declared = DECLARED[name]
    assert declared.kind in registry.KINDS
    is_component = issubclass(check_class(declared), ComponentTest)
    assert is_component == (declared.kind == 'component')
    if is_component:
        assert declared.model_info is None and declared.optimizer is None
        assert declared.throughput_metric is None
    else:
        assert declared.model_info is not None
        assert declared.throughput_metric in check_class(
            declared)._rfm_perf_fns


def test_the_components_are_declared():
    components = {n for n, d in DECLARED.items() if d.kind == 'component'}
    assert components == {'collectives', 'matmul_rate', 'sdc', 'storage'}


def test_unknown_names_list_the_known_ones():
    with pytest.raises(registry.UnknownWorkload,
                       match="unknown workload 'nope': use one of "
                             "alphafold2, bert"):
        registry.get('nope')


def test_no_shared_module_lists_the_workloads():
    '''The lists a new workload used to be added to are gone: the parsers'
    EXTRACTORS, model_info's WORKLOADS and PROGRAM_OPTIMIZERS, prepare's
    PREPARERS and NOTHING_TO_FETCH, config/score_weights.yaml.'''
    text = '\n'.join(p.read_text() for part in ('hpctestlib_ml', 'bench')
                     for p in (REPO / part).rglob('*.py'))
    for name in ('EXTRACTORS', 'PROGRAM_OPTIMIZERS', 'PREPARERS',
                 'NOTHING_TO_FETCH', 'WEIGHTS_FILE'):
        assert name not in text, name
    assert not (REPO / 'config' / 'score_weights.yaml').exists()


#: Literal tables keyed by checks that need no entry for a new one: the
#: GPU validation's measured plan per check (a check without one gets
#: the default plan, and the first half of the phases).
KEYED_BY_CHECK_ON_PURPOSE = {'bench/gpu/phases.py'}


def named_tables(path, names):
    '''(line, the names) of each literal dict (its keys), list, tuple or
    set of *path* that holds three or more of *names*.'''
    for node in ast.walk(ast.parse(path.read_text())):
        items = (node.keys if isinstance(node, ast.Dict) else node.elts
                 if isinstance(node, (ast.List, ast.Tuple, ast.Set))
                 else ())
        found = {i.value.split('%')[0] for i in items
                 if isinstance(i, ast.Constant) and isinstance(i.value, str)
                 and i.value.split('%')[0] in names}
        if len(found) >= 3:
            yield node.lineno, sorted(found)


def test_no_library_or_bench_module_keeps_a_table_of_workloads():
    '''A list or table of the workloads (their names, checks or programs)
    outside their declarations misses the next one: precisions.CHOICES,
    compliance.RULESETS, the settings' per-workload tables, the harness
    bench's CHECKS (which lost DeepLabV3Plus to a rename and never had
    TorchvisionResNet50) were such lists.'''
    names = {n for d in DECLARED.values() for n in (d.name, d.check,
                                                    d.program)}
    found = [(str(path.relative_to(REPO)), line, listed)
             for part in ('hpctestlib_ml', 'bench')
             for path in sorted((REPO / part).rglob('*.py'))
             if 'registry' not in path.relative_to(REPO).parts and
             str(path.relative_to(REPO)) not in KEYED_BY_CHECK_ON_PURPOSE
             for line, listed in named_tables(path, names)]
    assert found == []


def distribution(requirement):
    '''The normalised distribution a pip *requirement* names (PEP 503).'''
    name = re.split(r'[\s\[<>=!~;]', requirement.strip(), maxsplit=1)[0]
    return re.sub(r'[-_.]+', '-', name).lower()


def test_every_declared_package_is_pinned_for_the_environment():
    '''A declaration's packages become requirements where the suite's
    environment and image are made: pyproject.toml (``make setup``'s
    extras, the image's pins); a package declared and pinned nowhere
    would first fail as an ImportError in a job (the developer guide,
    "New Python dependency").'''
    import tomllib
    with open(REPO / 'pyproject.toml', 'rb') as fp:
        project = tomllib.load(fp)['project']
    pinned = {distribution(r) for r in project['dependencies']} | {
        distribution(r) for extra in project['optional-dependencies']
        .values() for r in extra}
    unpinned = sorted({(name, p) for name, declared in DECLARED.items()
                       for p in declared.packages
                       if distribution(p) not in pinned})
    assert not unpinned, unpinned


@pytest.mark.parametrize('change, words', [
    # The architecture reading: a size key that is no declared variable
    # ended setup in an AttributeError (plugins/sizing.py), and every
    # guard test still passed.
    ({'sizes': {'tiny': {'steps': 2, 'stepz': 3}}}, "workload cosmoflow: "
     "size 'tiny' sets 'stepz', which is no test variable of its check: "
     "declare it in the workload's variables"),
    ({'packages': ('timm;',)}, "workload cosmoflow: package 'timm;' is no "
     "pip requirement"),
    # Issue 41: a published fact that does not match the declaration was
    # a hand number no check read.
    ({'published': {'huge': (Published(1, 'a', 'https://a'),)}},
     "workload cosmoflow: a published count names size 'huge', which it "
     "does not declare: name one of its sizes or models (tiny, benchmark)"),
    ({'published': {'benchmark': ((8_907_556, 'the reference'),)}},
     "workload cosmoflow: published['benchmark'] is no tuple of "
     "model_info.Published"),
    ({'published': {'benchmark': (Published(8_907_556, 'a', ' '),)}},
     "workload cosmoflow: the published count 8,907,556 of size "
     "'benchmark' names no source"),
    ({'published': {'benchmark': (Published(8_907_556, 'a', 'https://a'),
                                  Published(8_907_557, 'b', 'https://b'))}},
     "workload cosmoflow: size 'benchmark' declares 8,907,556 and 8,907,557 "
     "as the count the program builds"),
    ({'model_info': None}, "workload cosmoflow: publishes parameter counts "
     "but declares no model builder"),
])
def test_a_declaration_that_cannot_work_is_refused_when_it_loads(change,
                                                                 words):
    '''One line naming the workload and the fix, when the registry loads,
    before any check is set up; the registered declarations all pass.'''
    import dataclasses
    from hpctestlib_ml import registry
    for declared in registry.registered().values():
        registry.check_declaration(declared)
    bad = dataclasses.replace(registry.get('cosmoflow'), **change)
    with pytest.raises(registry.DeclarationError) as err:
        registry.check_declaration(bad)
    assert str(err.value).startswith(words)
    assert '\n' not in str(err.value)
