"""The generated block of the references files: ``hpcml references
--write`` merges the :class:`~.derive.CaseReference` of each case
into the per-workload files the checks read
(``config/references/<workload>.yaml``, or ``HPCML_REFERENCES_DIR``): one
generated block at the top of each file (between :data:`BEGIN` and
:data:`END`, under the top-level key :data:`BLOCK_KEY`, which ReFrame does
not read), pulled into each check's references with a YAML merge key
(``<<: *hpcml_history_<Check>``). Published references (JUWELS, CARAML)
are never changed, and where a partition has published references its
history references are not written. Every entry is commented with the
runs it came from; the same text is kept in the block's ``sources``, from
which a check names them when it fails. Beside them: each case's
reference loss curve (``loss_curves``) and, for a check that compares
answers, the known-good digest of each software stack its passing runs
agreed on (``answers``: :mod:`hpctestlib_ml.answers`).
"""
import os
import re

import yaml

from hpctestlib_ml import yaml_files
from hpctestlib_ml.history_refs import ReferencesError

#: Top-level key of the generated block, which ReFrame does not read.
BLOCK_KEY = 'hpcml_history'
#: The lines that open and close the generated block in a file.
BEGIN = ('# >>> hpcml references: generated from this site\'s history by '
         '`hpcml references --write`; rerun it to change this block')
END = '# <<< hpcml references'

#: The generated block's sections beside ``references``: per check,
#: partition and case, the runs' description, the reference loss curve,
#: and the known-good digests by software stack.
SECTIONS = ('sources', 'loss_curves', 'answers')

#: The ``$index`` of every references file.
INDEX = ['$partition', 'reference_case']


def _scalar(value):
    '''*value* as one line of YAML (flow style).'''
    text = yaml.safe_dump(value, default_flow_style=True, width=10 ** 6)
    return text.strip().removesuffix('...').strip()


def _key(text):
    return _scalar(str(text))


def mapping_owners(data):
    '''Test class -> the class whose mapping it shares (YAML aliases:
    ``CosmoFlowContainer: *cosmoflow`` shares CosmoFlow's).'''
    owners = {}
    for name, value in data.items():
        if name == BLOCK_KEY or not isinstance(value, dict):
            continue
        owners[name] = next(k for k, v in data.items() if v is value)
    return owners


def _published(data, name, block):
    '''Partitions of *name*'s mapping that are not from the block (which
    keys its entries by the class owning the mapping: a YAML alias such as
    ``CosmoFlowContainer: *cosmoflow`` shares CosmoFlow's).'''
    mapping = data.get(name) or {}
    owner = mapping_owners(data).get(name, name)
    generated = set((block.get('references') or {}).get(owner) or {})
    return {k: v for k, v in mapping.items()
            if k != '$index' and k not in generated}


def read_block(data):
    '''The generated block of a references file's *data* (parsed YAML):
    its ``references`` and :data:`SECTIONS`, each {} where absent, so that
    an old file and a new one read alike.'''
    block = data.get(BLOCK_KEY) or {}
    return {part: dict(block.get(part) or {})
            for part in ('references', *SECTIONS)}


def render_block(block):
    '''The generated block's text, sorted by check, partition and case.'''
    lines = [BEGIN, f'{BLOCK_KEY}:', '  references:']
    for owner in sorted(block['references']):
        lines.append(f'    {owner}: &hpcml_history_{owner}')
        for part in sorted(block['references'][owner]):
            lines.append(f'      {_key(part)}:')
            cases = block['references'][owner][part]
            for case in sorted(cases):
                source = (block['sources'].get(owner, {}).get(part, {})
                          .get(case))
                if source:
                    lines.append(f'        # {source}')
                lines.append(f'        {_key(case)}:')
                for name, value in sorted(cases[case].items()):
                    lines.append(f'          {name}: {_scalar(list(value))}')
    for section in SECTIONS:
        lines.append(f'  {section}:')
        for owner in sorted(block[section]):
            lines.append(f'    {owner}:')
            for part in sorted(block[section][owner]):
                lines.append(f'      {_key(part)}:')
                for case, value in sorted(block[section][owner][part]
                                          .items()):
                    lines.append(f'        {_key(case)}: {_scalar(value)}')
    lines.append(END)
    return '\n'.join(lines) + '\n'


#: The opening comment of a references file that did not exist.
_NEW_FILE = '''# References of {workload} (ReFrame 4.10 external references,
# $ref/$index; index: system:partition, then the case as the check logs it
# in ``reference_case``).
'''


def _insert_block(text, block_text):
    '''*text* with the generated block replaced, or inserted after the
    leading comment lines.'''
    if BEGIN in text and END in text:
        start = text.index(BEGIN)
        end = text.index(END, start) + len(END)
        end += 1 if text[end:end + 1] == '\n' else 0
        return text[:start] + block_text + text[end:]
    lines = text.splitlines(keepends=True)
    head = 0
    while head < len(lines) and (lines[head].startswith('#') or
                                 not lines[head].strip()):
        head += 1
    return ''.join(lines[:head]) + block_text + '\n' + ''.join(lines[head:])


def _merge_line(owner):
    return f'  <<: *hpcml_history_{owner}'


def _add_merge_line(text, owner):
    '''*owner*'s mapping in *text* with the merge of its history block (or
    a new mapping at the end).'''
    if re.search(rf'^{re.escape(_merge_line(owner))}\s*$', text, re.M):
        return text
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if re.match(rf'^{re.escape(owner)}:', line):
            if not (i + 1 < len(lines) and lines[i + 1].startswith('  ')):
                raise ReferencesError(
                    f'{owner} is not a block mapping in this file: write its '
                    f'references as "{owner}:" with indented entries')
            at = i + 1
            if lines[at].strip().startswith('$index'):
                at += 1
            lines.insert(at, _merge_line(owner) + '\n')
            return ''.join(lines)
    if text and not text.endswith('\n'):
        text += '\n'
    return (text + f'\n{owner}:\n  $index: [{", ".join(INDEX)}]\n'
            f'{_merge_line(owner)}\n')


def _put(block, owner, ref):
    '''*ref*'s entries in the generated *block*, under *owner*'s mapping
    (a case without a loss curve or known-good digests drops those it
    had).'''
    for section, value in (('references', ref.metrics),
                           ('sources', ref.describe()),
                           ('loss_curves', ref.loss_curve),
                           ('answers', ref.answers or None)):
        partitions = block[section].setdefault(owner, {})
        cases = partitions.setdefault(ref.partition, {})
        if value is None:
            cases.pop(ref.case, None)
        else:
            cases[ref.case] = value
        # No empty mapping: it would be written as a YAML null.
        if not cases:
            del partitions[ref.partition]
        if not partitions:
            del block[section][owner]


def merge_into_file(path, workload, references):
    '''Merge *references* (:class:`CaseReference`, one workload) into the
    references file *path*; returns one line per case written or left out.
    Published entries stay as they are (checked by reading the result back)
    and the file is replaced atomically.'''
    try:
        text = (yaml_files.read_text(path) if os.path.exists(path)
                else _NEW_FILE.format(workload=workload))
        data = yaml_files.loads(text, path) or {}
    except yaml_files.YamlFileError as err:
        raise ReferencesError(f'--write: {err}: fix it, or --write another '
                              f'file; nothing was written') from None
    block = read_block(data)
    owners = mapping_owners(data)
    written = []
    for ref in references:
        owner = owners.get(ref.check, ref.check)
        index = (data.get(owner) or {}).get('$index')
        if index is not None and list(index) != INDEX:
            raise ReferencesError(
                f'{path}: {owner} is indexed by {list(index)}, not {INDEX}: '
                f'history references need the case level; re-index it')
        if ref.partition in _published(data, owner, block):
            written.append(f'left out {ref.check} {ref.partition} '
                           f'{ref.case!r}: {ref.partition} has published '
                           f'references in {path}, which hpcml references '
                           f'does not change')
            continue
        if not ref.metrics:
            continue
        _put(block, owner, ref)
        written.append(f'{ref.check} {ref.partition} {ref.case!r}: '
                       f'{len(ref.metrics)} metrics from {ref.describe()}')
    if not block['references']:
        return written
    new_text = _insert_block(text, render_block(block))
    for owner in block['references']:
        new_text = _add_merge_line(new_text, owner)
    _verify(path, data, new_text, block)
    _replace(path, new_text)
    return written


def _replace(path, text):
    '''Write *text* to *path* whole or not at all: through a partial file
    renamed over it, removed where writing fails; :class:`ReferencesError`
    naming the path then.'''
    partial = f'{path}.partial'
    try:
        with open(partial, 'w') as fp:
            fp.write(text)
        os.replace(partial, path)
    except OSError as err:
        if os.path.exists(partial):
            os.remove(partial)
        raise ReferencesError(f'--write: cannot write {path} ({err.strerror})'
                              f': give a file or directory you may write; '
                              f'nothing was written') from None


def _verify(path, old, new_text, block):
    '''The new text parses, holds the block as meant, and every published
    entry is what it was.'''
    new = yaml.safe_load(new_text)
    if read_block(new) != block:
        raise ReferencesError(f'{path}: the generated block did not read '
                              f'back as written (file left unchanged)')
    old_block = read_block(old)
    for name in old:
        if name == BLOCK_KEY:
            continue
        if (isinstance(old[name], dict) and
                _published(old, name, old_block) !=
                _published(new, name, block)):
            raise ReferencesError(f'{path}: writing would change the '
                                  f'published references of {name} (file '
                                  f'left unchanged)')


def preview(references):
    '''The generated block *references* would make, as text.'''
    block = {part: {} for part in ('references', *SECTIONS)}
    for ref in references:
        if ref.metrics:
            _put(block, ref.check, ref)
    return render_block(block)

