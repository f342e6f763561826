"""One home per size table (issue 23): each program under ``src/`` keeps
its sizes in a torch-free module that the program imports and the library
reads by path (:mod:`hpctestlib_ml.program_tables`); no second copy of the
numbers in the library or elsewhere in the program; reading them imports
neither torch nor the programs' packages; and ``src/alphafold2``'s
modules import one another without a cycle."""
import ast
import importlib
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO

SRC = REPO / 'src'

#: program -> (its table module, the table's name there).
TABLES = {
    'cosmoflow': ('sizes', 'SIZES'),
    'bert_pretrain': ('sizes', 'MODELS'),
    'deepcam': ('architecture', 'SIZES'),
    'alphafold2': ('sizes', 'SIZES'),
    'torchvision_resnet50': ('sizes', 'SIZES'),
}

#: program -> the library's name for the table (module, attribute path).
LIBRARY_TABLES = {
    'cosmoflow': ('hpctestlib_ml.registry.cosmoflow', 'SIZES'),
    'bert_pretrain': ('hpctestlib_ml.registry.bert', 'MODELS'),
    'deepcam': ('hpctestlib_ml.registry.deeplabv3plus', 'architecture().SIZES'),
    'alphafold2': ('hpctestlib_ml.registry.alphafold2', 'SIZES'),
    'torchvision_resnet50': ('hpctestlib_ml.registry.torchvision_resnet50',
                             'PROGRAM_SIZES'),
}

#: program -> its modules that use the table, by the table's name.
PROGRAM_USERS = {
    'cosmoflow': ('__main__',),
    'bert_pretrain': ('__main__',),
    'deepcam': ('__main__', 'model'),
    'alphafold2': ('__main__',),
    'torchvision_resnet50': ('__main__',),
}

#: Dicts keyed by a table's sizes that are not its numbers.
NOT_COPIES = {
    # Forward FLOPs measured per size (tests/test_model_info.py).
    'FORWARD_FLOPS',
}


def table_keys(program):
    '''The sizes of *program*'s table, read from its file's text (no
    import: the test reports a missing or moved table as such).'''
    module, name = TABLES[program]
    path = SRC / program / f'{module}.py'
    assert path.exists(), f'{program}: no table module {path}'
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
                getattr(t, 'id', None) == name for t in node.targets):
            return {k.value for k in node.value.keys}
    raise AssertionError(f'{path}: no {name} = {{...}}')


def assigned_name(tree, target):
    '''The name a dict literal *target* is assigned to in *tree*, if any.'''
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.value is target:
            return getattr(node.targets[0], 'id', None)
    return None


def copies(program):
    '''(file, line, name) of every dict literal keyed by exactly the
    sizes of *program*'s table outside its table module: in the library
    and in the program's other modules. Keyed by the sizes is the sign of
    a copy (the library's checks key theirs by ``tiny``/``benchmark``);
    a figure measured per size is named in :data:`NOT_COPIES`. Programs
    that share size names (``tiny``, ``reference``) see each other's
    copies in the library: the file and line say whose.'''
    module, _ = TABLES[program]
    keys, home = table_keys(program), SRC / program / f'{module}.py'
    paths = [*(REPO / 'hpctestlib_ml').rglob('*.py'),
             *(SRC / program).glob('*.py')]
    found = []
    for path in sorted(p for p in paths if p != home):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and {
                    getattr(k, 'value', None) for k in node.keys} == keys:
                name = assigned_name(tree, node)
                if name not in NOT_COPIES:
                    found.append((str(path.relative_to(REPO)), node.lineno,
                                  name))
    return found


#: Programs whose size names are the checks' own (``tiny``,
#: ``benchmark``): a dict keyed by them is no sign of a copy.
CHECK_SIZE_NAMES = ('torchvision_resnet50',)


@pytest.mark.parametrize('program', [p for p in TABLES
                                     if p not in CHECK_SIZE_NAMES])
def test_no_second_copy_of_a_size_table(program):
    assert copies(program) == []


def test_no_second_copy_of_the_torchvision_presets():
    '''The torchvision check's sizes are the program's presets, renamed
    (its declaration's check_size): no dict literal of the library holds
    a preset's settings, under the program's names or the check's.'''
    names = {'num_warmup_batches', 'num_batches_per_iter', 'num_iters',
             'batches_per_iteration', 'warmup_batches'}
    found = []
    for path in sorted((REPO / 'hpctestlib_ml').rglob('*.py')):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict) and names & {
                    getattr(k, 'value', None) for k in node.keys} and all(
                    isinstance(v, ast.Constant) for v in node.values):
                found.append((str(path.relative_to(REPO)), node.lineno))
    assert found == []


@pytest.mark.parametrize('program', list(LIBRARY_TABLES))
def test_the_library_holds_the_programs_table(program):
    from hpctestlib_ml import program_tables
    module, name = TABLES[program]
    library_module, expression = LIBRARY_TABLES[program]
    library = eval(expression, vars(importlib.import_module(library_module)))
    assert library is getattr(program_tables.load(program, module), name)


def test_alphafold2_recycles_follow_the_programs_table(monkeypatch):
    '''The library keeps no AlphaFold2 sizes: its mean recycles per
    sample move with an edit of the program's table.'''
    from hpctestlib_ml import program_tables
    from hpctestlib_ml.registry import alphafold2
    sizes = program_tables.load('alphafold2', 'sizes').SIZES
    monkeypatch.setitem(sizes, 'tiny', sizes['tiny']._replace(
        max_recycles=7))
    assert alphafold2.mean_recycles('tiny') == 3.5


@pytest.mark.parametrize('program', list(TABLES))
def test_the_program_and_the_library_read_one_file(program, monkeypatch):
    from hpctestlib_ml import program_tables
    monkeypatch.syspath_prepend(str(SRC))
    module, name = TABLES[program]
    home = importlib.import_module(f'{program}.{module}')
    for user in PROGRAM_USERS[program]:
        used = importlib.import_module(f'{program}.{user}')
        assert getattr(used, name) is getattr(home, name), user
    loaded = program_tables.load(program, module)
    assert pathlib.Path(loaded.__file__) == pathlib.Path(home.__file__)


@pytest.mark.parametrize('program', list(TABLES))
def test_table_modules_import_only_the_standard_library(program):
    module, _ = TABLES[program]
    tree = ast.parse((SRC / program / f'{module}.py').read_text())
    imported = {alias.name.split('.')[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split('.')[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert imported <= sys.stdlib_module_names


READ_EVERY_TABLE = '''
import importlib, pkgutil, sys
import hpctestlib_ml
for module in pkgutil.walk_packages(hpctestlib_ml.__path__, 'hpctestlib_ml.'):
    importlib.import_module(module.name)
from hpctestlib_ml import registry
from hpctestlib_ml.registry import (alphafold2, bert, cosmoflow,
                                    deeplabv3plus, torchvision_resnet50)
registry.registered()
for size in cosmoflow.SIZES.values():
    cosmoflow.forward_flops(*size)
for name in bert.MODELS:
    bert.forward_flops(name)
for name in deeplabv3plus.architecture().SIZES:
    deeplabv3plus.forward_flops(name)
for name in ('tiny', 'reference'):
    alphafold2.training_flops(name)
for size in torchvision_resnet50.WORKLOAD.sizes.values():
    torchvision_resnet50.training_flops(size['image_size'])
print(sorted(m for m in sys.modules if m.split('.')[0] in
             ('torch', 'cosmoflow', 'bert_pretrain', 'deepcam', 'alphafold2',
              'mlperf_train', 'torchvision_resnet50')))
'''


def test_the_library_imports_and_reads_tables_without_torch():
    '''The library is imported, and reads the tables, inside ReFrame,
    which must not load PyTorch; it reads them by path, so no program
    package is imported either.'''
    out = subprocess.run([sys.executable, '-c', READ_EVERY_TABLE],
                         capture_output=True, text=True, check=True,
                         cwd=REPO).stdout
    assert out.strip() == '[]'


def imports_of(path, package, modules):
    '''The modules of *package* (names in *modules*) that the file
    *path* imports, at its top or inside functions.'''
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package if node.level else node.module or ''
            if node.level and node.module:
                base = f'{package}.{node.module}'
            names = [base] + [f'{base}.{a.name}' for a in node.names]
        else:
            continue
        found |= {n.split('.', 1)[1] for n in names
                  if n.startswith(package + '.') and
                  n.split('.', 1)[1] in modules}
    return found


def import_cycle(package):
    '''A list of modules that import one another in a circle within
    ``src/<package>``, or None.'''
    files = {p.stem: p for p in (SRC / package).glob('*.py')}
    graph = {m: imports_of(p, package, files) - {m} for m, p in files.items()}
    done, path = set(), []

    def visit(module):
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        path.append(module)
        cycle = next(filter(None, map(visit, sorted(graph[module]))), None)
        path.pop()
        done.add(module)
        return cycle

    return next(filter(None, map(visit, sorted(graph))), None)


@pytest.mark.parametrize('package', sorted(
    p.parent.name for p in SRC.glob('*/__init__.py')))
def test_no_import_cycle_in_a_program(package):
    '''src/alphafold2's __main__ and data imported each other (issue
    23); no program's modules do now.'''
    assert import_cycle(package) is None


def test_the_cycle_finder_finds_one(tmp_path, monkeypatch):
    '''The checker itself on a package whose __main__ and data import
    each other, as src/alphafold2's did.'''
    package = tmp_path / 'pkg'
    package.mkdir()
    (package / '__main__.py').write_text(
        'def main():\n    from pkg import data\n')
    (package / 'data.py').write_text('from pkg.__main__ import collate\n')
    (package / 'geometry.py').write_text('import math\n')
    monkeypatch.setattr(sys.modules[__name__], 'SRC', tmp_path)
    assert import_cycle('pkg') == ['__main__', 'data', '__main__']
