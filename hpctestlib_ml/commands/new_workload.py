"""``hpcml new-workload NAME``: a new workload from the template
(``templates/workload/``, a small real workload: a multilayer perceptron
regressing synthetic data): its program (``src/NAME/``), its parser, its
declaration, its check class and leaf, its references file, its tests and
its documentation page, each a new file where the template's is, the template's name
replaced by NAME. No file of the repository is changed; the developer
guide's "Adding a workload" says what to change in each new one.
"""
import importlib.util
import keyword
import re
import sys

from hpctestlib_ml.paths import REPO_ROOT, SRC_DIR, WORKLOAD_TEMPLATE_DIR

#: The command's line in ``hpcml --help``.
HELP = ('a new workload from the template: its program, parser, '
        'declaration, check and tests, as new files')

#: The template's names, replaced in the new files' paths and text.
NAME, CHECK = 'template_workload', 'TemplateWorkload'

#: The longest workload name: its references file, ``NAME.yaml``, and its
#: tests' ``test_NAME.py`` stay far below a file name's 255 bytes.
MAX_NAME = 64

_NAME = re.compile(r'^[a-z][a-z0-9_]*$')
_CHECK = re.compile(r'^[A-Z][A-Za-z0-9]*$')


def add_arguments(parser):
    parser.add_argument('name', help='the workload (lower case, letters, '
                                     'digits and _): its program, modules '
                                     'and references file')
    parser.add_argument('--check', help='its check class (default: NAME in '
                                        'CamelCase)')


def camel(name):
    '''``my_model`` -> ``MyModel``.'''
    return ''.join(part[:1].upper() + part[1:] for part in name.split('_'))


def plan(name, check, template=WORKLOAD_TEMPLATE_DIR, root=REPO_ROOT):
    '''[(template file, new file, its text)] of workload *name* with check
    class *check*.'''
    files = []
    for path in sorted(p for p in template.rglob('*') if p.is_file()):
        if '__pycache__' in path.parts:
            continue
        relative = str(path.relative_to(template)).replace(NAME, name)
        text = path.read_text().replace(CHECK, check).replace(NAME, name)
        files.append((path, root / relative, text))
    return files


def _check_classes(directory):
    '''{class name: file} of the classes the check files in *directory*
    define.'''
    found = {}
    for path in sorted(directory.glob('*.py')):
        for match in re.finditer(r'^class (\w+)\b', path.read_text(),
                                 re.MULTILINE):
            found.setdefault(match.group(1),
                             str(path.relative_to(directory.parent)))
    return found


def problem(name, check, files, root=REPO_ROOT):
    '''Why workload *name* (check *check*) cannot be made, naming the fix;
    None where it can.'''
    if not _NAME.match(name):
        return (f'{name!r} is no workload name: use lower case letters, '
                f'digits and _, starting with a letter')
    if keyword.iskeyword(name):
        return (f'{name!r} is a Python keyword, which no module can be '
                f'named: choose another name')
    if len(name) > MAX_NAME:
        return (f'{name[:20]}... is {len(name)} characters long: its files\' '
                f'names would pass the file system\'s bound: use at most '
                f'{MAX_NAME}')
    if not _CHECK.match(check):
        return f'{check!r} is no check class name: use --check CamelCase'
    existing = [str(new.relative_to(REPO_ROOT)) for _, new, _ in files
                if new.exists()]
    if existing:
        return (f'{", ".join(existing)} exist already: choose another '
                f'name')
    taken = _check_classes(root / 'checks').get(check)
    if taken:
        return (f'a check class {check} exists already ({taken}): ReFrame '
                f'would take one for the other: choose another --check')
    found = importlib.util.find_spec(name)
    if found is not None:
        return (f'{name} is a module on the Python path already '
                f'({found.origin}): its program, python -m {name} from '
                f'{SRC_DIR}, would not be the one run: choose another name')
    return None


def run(args):
    '''Write the new workload's files; exit status 2 where it cannot be
    made (named on stderr), and nothing written.'''
    check = args.check or camel(args.name)
    files = plan(args.name, check)
    why = problem(args.name, check, files)
    if why:
        print(f'hpcml new-workload: error: {why}', file=sys.stderr)
        return 2
    for _, new, text in files:
        new.parent.mkdir(parents=True, exist_ok=True)
        new.write_text(text)
        print(f'wrote {new.relative_to(REPO_ROOT)}')
    print(f'{args.name}: its check {check} runs with `reframe -C '
          f'config/local.py -c checks/{args.name}.py -r`, its tests with '
          f'`pytest tests/test_{args.name}.py`; then make each file the '
          f'benchmark\'s (the developer guide, "Adding a workload")')
    return 0
