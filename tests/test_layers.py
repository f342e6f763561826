"""The structure of hpctestlib_ml, held against its import graph: every
module stands in one layer of a declared order, and imports only from its
own layer and the layers below (module-level imports, imports inside
functions and ``importlib.import_module`` alike: a lazy import that runs
back up a layer is one all the same). Above the registry stand two wings
side by side, neither importing the other: the tools (``hpcml``), which
never load ReFrame, and the ReFrame test classes with their plugins.

Also: the tools import no ReFrame when they run (a child process,
``sys.modules``), and no class of the library is over 200 lines.
"""
import ast
import fnmatch
import json
import subprocess
import sys

from conftest import DATA, REPO

PACKAGE = REPO / 'hpctestlib_ml'

#: The layers every module stands on, bottom first: (name, the modules'
#: names under ``hpctestlib_ml``, as fnmatch patterns).
FOUNDATION = (
    ('leaves', ('__init__', 'constants', 'counts', 'errors', 'paths', 'cache',
                'yaml_files', 'metrics', 'sessions', 'var_full', 'energy',
                'precisions', 'memory_estimate', 'venv_config',
                'tensorflow_build', 'program_tables', 'perflog_fields',
                'parsers',
                'parsers.labels', 'parsers.timed_window',
                'parsers.hpcml_records', 'history_refs')),
    ('pure decisions', ('sizes', 'peaks', 'layout', 'launch', 'container',
                        'changes', 'changes.*',
                        'image',
                        'model_info', 'prepare', 'flops', 'device_check',
                        'answers',
                        'history_refs.store', 'history_refs.lookup')),
    ('log parsers', ('parsers.*',)),
    ('what logs and settings say', ('settings', 'inputs', 'run_end',
                                    'triage', 'triage.*', 'provenance',
                                    'cpu_peak', 'state_size', 'tsdb',
                                    'tsdb.series', 'tsdb.push')),
    ('the registry of workloads', ('registry', 'registry.*')),
)

#: The wings on the registry, each bottom first; a module of one never
#: imports a module of the other.
WINGS = {
    'tools': (
        ('analyses by workload', ('history_refs.derive', 'compliance')),
        ('report', ('report', 'report.*', 'tsdb.read')),
        ('commands', ('commands', 'commands.*', 'cli')),
    ),
    'reframe': (
        ('site configuration', ('container_launch', 'siteconfig',
                                'strict_reframe')),
        ('plugins', ('plugins', 'plugins.*')),
        ('base', ('base',)),
        ('test classes', ('workloads', 'workloads.*')),
    ),
}


def module_name(path, root=PACKAGE):
    '''``registry.megatron`` of ``<root>/registry/megatron/__init__.py``.'''
    parts = list(path.relative_to(root).with_suffix('').parts)
    if parts[-1] == '__init__' and len(parts) > 1:
        parts.pop()
    return '.'.join(parts)


def modules(root=PACKAGE):
    '''Module name -> path, of every module of the package at *root*.'''
    return {module_name(p, root): p for p in sorted(root.rglob('*.py'))}


def place(name, foundation=FOUNDATION, wings=WINGS):
    '''(wing or None, height) of module *name*: the foundation's layers
    are 0, 1, ...; a wing's stand above them all. None where no layer
    names it.'''
    for height, (_, patterns) in enumerate(foundation):
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            return None, height
    for wing, layers in wings.items():
        for height, (_, patterns) in enumerate(layers):
            if any(fnmatch.fnmatchcase(name, p) for p in patterns):
                return wing, len(foundation) + height
    return None


def _dynamic_target(call, own):
    '''The module an ``import_module(...)`` call names, where its text
    starts with the package's name (or ``__name__``, *own*'s).'''
    if not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        first = arg.values[0]
        if isinstance(first, ast.Constant):
            prefix = first.value
        elif (isinstance(first, ast.FormattedValue) and
              getattr(first.value, 'id', '') == '__name__'):
            prefix = f'hpctestlib_ml.{own}.'
        else:
            return None
        return prefix.rstrip('.')
    return None


def imports(path, name, known):
    '''The modules of the package (names in *known*) that module *name*
    at *path* imports, at its top, inside functions or through
    ``importlib.import_module``: [(imported, line)].'''
    found = []
    package = name if path.name == '__init__.py' else name.rpartition('.')[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                up = package.split('.')[:len(package.split('.')) -
                                        node.level + 1]
                base = '.'.join(['hpctestlib_ml', *filter(None, up),
                                 *filter(None, [node.module])])
            targets = [f'{base}.{a.name}' for a in node.names] + [base]
        elif (isinstance(node, ast.Call) and
              getattr(node.func, 'attr', getattr(node.func, 'id', '')) ==
              'import_module'):
            target = _dynamic_target(node, name)
            targets = [target] if target else []
        for target in targets:
            if not target.startswith('hpctestlib_ml.'):
                continue
            inner = target[len('hpctestlib_ml.'):]
            # the longest known module the name starts with
            while inner and inner not in known:
                inner = inner.rpartition('.')[0]
            if inner and inner != name:
                found.append((inner, node.lineno))
    return sorted(set(found))


def back_up(root=PACKAGE, foundation=FOUNDATION, wings=WINGS):
    '''Every import of the package that runs back up a layer, or across
    from one wing to the other: ``file:line a -> b``.'''
    known = modules(root)
    found = []
    for name, path in known.items():
        here = place(name, foundation, wings)
        for target, line in imports(path, name, known):
            there = place(target, foundation, wings)
            if here is None or there is None:
                continue
            crosses = there[0] is not None and there[0] != here[0]
            if crosses or there[1] > here[1]:
                found.append(f'{path.relative_to(root.parent)}:{line} '
                             f'{name} -> {target}')
    return found


def test_every_module_stands_in_a_layer():
    unplaced = [name for name in modules() if place(name) is None]
    assert unplaced == [], 'add them to a layer of tests/test_layers.py'


def test_no_import_runs_back_up_a_layer():
    assert back_up() == []


def test_the_checker_finds_an_import_back_up(tmp_path):
    '''The checker itself, on a package whose pure module imports the
    registry inside a function (a lazy import, as model_info's was), and
    whose tool imports a test class.'''
    package = tmp_path / 'hpctestlib_ml'
    (package / 'registry').mkdir(parents=True)
    (package / 'commands').mkdir()
    (package / '__init__.py').write_text('')
    (package / 'registry' / '__init__.py').write_text(
        'import importlib\n'
        'def load(n):\n'
        "    return importlib.import_module(f'{__name__}.{n}')\n")
    (package / 'sizes.py').write_text(
        'def f():\n    from hpctestlib_ml import registry\n')
    (package / 'workloads.py').write_text('import hpctestlib_ml.sizes\n')
    (package / 'commands' / '__init__.py').write_text(
        'from hpctestlib_ml.workloads import X\n')
    assert back_up(package) == [
        'hpctestlib_ml/commands/__init__.py:1 commands -> workloads',
        'hpctestlib_ml/sizes.py:2 sizes -> registry']


#: The tools run as a user runs them, then the names of the ReFrame
#: modules loaded, as JSON.
TOOLS_RUN = '''
import json, sys
from hpctestlib_ml import cli
for argv in json.loads(sys.argv[1]):
    try:
        cli.main(argv)
    except SystemExit:
        pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} &
                        {'reframe', 'hpctestlib_ml.base'} |
                        {m for m in sys.modules
                         if m.startswith(('hpctestlib_ml.workloads',
                                          'hpctestlib_ml.plugins'))})))
'''


def test_the_tools_import_no_reframe(tmp_path):
    '''``hpcml extract``, ``report``, ``prepare``, ``model-info`` and
    ``triage`` load neither ReFrame nor the test classes: they read the
    workloads' declarations alone.'''
    log = DATA / 'mllog' / 'cosmoflow_tiny_cpu_2ranks_torchrun.out'
    perflogs = DATA / 'history' / 'network_degraded' / 'perflogs'
    var = tmp_path / 'var'
    runs = [['extract', 'cosmoflow', str(log)],
            ['triage', str(log)],
            ['report', '--perflogs', str(perflogs), '--no-plots', '--out',
             str(tmp_path / 'report')],
            ['prepare', 'cosmoflow', '--dir', str(tmp_path / 'prepared')],
            ['model-info', 'cosmoflow', '--size', 'tiny']]
    proc = subprocess.run([sys.executable, '-c', TOOLS_RUN,
                           json.dumps(runs)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=600,
                          env={'HPCML_VAR_DIR': str(var),
                               'PATH': '/usr/bin:/bin',
                               'PYTHONPATH': str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'cosmoflow tiny (tiny)' in proc.stdout      # model-info ran
    assert json.loads(proc.stdout.splitlines()[-1]) == []


def classes(root=PACKAGE):
    '''(file:line name, lines) of every class of the package.'''
    for path in sorted(root.rglob('*.py')):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                yield (f'{path.relative_to(REPO)}:{node.lineno} {node.name}',
                       node.end_lineno - node.lineno + 1)


def test_no_class_is_over_200_lines():
    assert [(where, n) for where, n in classes() if n > 200] == []
