"""YAML files the suite reads (a report's weights, references files), with
what is wrong in one line: where the text stops being YAML, or that the
file is not text. The caller adds what to do."""
import yaml


class YamlFileError(ValueError):
    '''A file that is not YAML: its path and where, in one line.'''


def problem(err):
    '''One line of a :class:`yaml.YAMLError`: ``line L, column C: what``
    (PyYAML's own message spans lines and quotes the text).'''
    mark = getattr(err, 'problem_mark', None)
    what = getattr(err, 'problem', None) or str(err).splitlines()[0]
    where = (f'line {mark.line + 1}, column {mark.column + 1}: '
             if mark is not None else '')
    return f'{where}{what}'


def loads(text, path):
    '''The data of YAML *text*, read from *path*; :class:`YamlFileError`
    where it is not YAML.'''
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise YamlFileError(f'{path} is not YAML ({problem(err)})') from None


def read_text(path):
    '''The text of *path*; :class:`YamlFileError` where it is not UTF-8
    text (OSError where it cannot be read).'''
    with open(path, 'rb') as fp:
        raw = fp.read()
    try:
        return raw.decode('utf-8')
    except UnicodeDecodeError as err:
        raise YamlFileError(f'{path} is not text (byte {err.start} is not '
                            f'UTF-8)') from None


def read(path):
    '''The data of the YAML file *path*; :class:`YamlFileError` where it is
    not text or not YAML (OSError where it cannot be read).'''
    return loads(read_text(path), path)
