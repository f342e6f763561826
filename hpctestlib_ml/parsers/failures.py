"""Say in one line why a training program failed, from its output."""
import re

_TRACEBACK = 'Traceback (most recent call last)'

# "RuntimeError: ...", "torch.distributed.DistBackendError: ...", possibly
# behind torchrun's "[rank0]: " label.
_EXCEPTION_LINE = re.compile(
    r'^(?:\[(?:rank|default)\d+\]:\s*)?'
    r'((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)'
    r'(?::.*)?)$', re.MULTILINE)


def has_traceback(text):
    return _TRACEBACK in text


def failure_line(text, limit=300):
    '''The last exception line of *text*, else its last non-empty line.'''
    matches = _EXCEPTION_LINE.findall(text)
    if matches:
        line = matches[-1]
    else:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        line = lines[-1] if lines else '(no output)'

    line = line.strip()
    return line if len(line) <= limit else line[:limit] + '...'
