"""Read Apptainer definition files the way ``apptainer build`` does, for the
lint tests (Apptainer itself is not installable here).

Rules follow Apptainer's parser (pkg/build/types/parser/deffile.go): header
lines ``Key: value`` before the first section, comment lines skipped; the
known section names; ``{{ NAME }}`` templates filled from ``%arguments``
defaults or ``--build-arg`` (Apptainer >= 1.2).
"""
import dataclasses
import re

#: Header keywords Apptainer accepts.
VALID_HEADERS = {'bootstrap', 'from', 'includecmd', 'mirrorurl', 'updateurl',
                 'osversion', 'include', 'library', 'registry', 'namespace',
                 'stage', 'product', 'user', 'regcode', 'productpgp',
                 'confurl', 'fingerprints', 'setopt'}

#: Section names Apptainer accepts (besides %app* sections).
VALID_SECTIONS = {'help', 'setup', 'files', 'labels', 'environment', 'pre',
                  'post', 'runscript', 'test', 'startscript', 'arguments'}

_SECTION = re.compile(r'^%(\w+)\s*(.*)$')
_TEMPLATE = re.compile(r'{{\s*(\w+)\s*}}')


class DefinitionError(ValueError):
    pass


@dataclasses.dataclass
class Definition:
    header: dict
    sections: dict
    arguments: dict
    templates: set


def parse(text):
    '''A :class:`Definition`; DefinitionError for what Apptainer rejects.'''
    header, sections, current = {}, {}, None
    for number, line in enumerate(text.splitlines(), 1):
        match = _SECTION.match(line)
        if match:
            current = match.group(1).lower()
            if current not in VALID_SECTIONS and not current.startswith('app'):
                raise DefinitionError(f'line {number}: unknown section '
                                      f'%{current}')
            if current in sections:
                raise DefinitionError(f'line {number}: section %{current} '
                                      f'appears twice')
            sections[current] = []
            continue
        if current is not None:
            sections[current].append(line)
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith('#'):
            continue
        key, sep, value = stripped.split('#')[0].partition(':')
        if not sep:
            raise DefinitionError(f'line {number}: header line without a '
                                  f'value: {stripped!r}')
        if key.strip().lower() not in VALID_HEADERS:
            raise DefinitionError(f'line {number}: unknown header '
                                  f'{key.strip()!r}')
        header[key.strip().lower()] = value.strip()

    sections = {name: '\n'.join(lines).strip('\n')
                for name, lines in sections.items()}
    arguments = {}
    for line in sections.get('arguments', '').splitlines():
        if line.strip() and not line.strip().startswith('#'):
            name, _, default = line.strip().partition('=')
            arguments[name.strip()] = default.strip()

    return Definition(header, sections, arguments,
                      set(_TEMPLATE.findall(text)))


def render(text, arguments):
    '''*text* with its ``{{ NAME }}`` templates filled in.'''
    return _TEMPLATE.sub(lambda m: arguments[m.group(1)], text)
