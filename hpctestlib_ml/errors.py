"""The error a test variable or site setting that cannot work raises, and
the checks of count variables that raise it.

Not tied to a test object: the pure modules (:mod:`hpctestlib_ml.sizes`)
raise it too, and ReFrame shows its message as the case's one-line
failure.
"""
from reframe.core.exceptions import ReframeError

from hpctestlib_ml.counts import count


class BadInputError(ReframeError):
    '''A test variable or site setting that cannot work; the message names
    the fix.'''


# ReFrame names a failure by its exception's class: its reason line is the
# class name decamelized, then the message (reframe.core.exceptions.what),
# "bad input error: ..." for this class's own name. Named by its category,
# the reason reads "bad_input: batch_size must be ...": the category once
# and first, as every failed case's (hpctestlib_ml.triage).
BadInputError.__name__ = BadInputError.__qualname__ = 'bad_input'


class FilesystemError(ReframeError):
    '''An input the case reads is not where its settings say
    (:mod:`hpctestlib_ml.inputs`); the message names the path and the
    fix. Named by its category, as :class:`BadInputError`.'''


FilesystemError.__name__ = FilesystemError.__qualname__ = 'filesystem'


def positive_int(name, value, minimum=1):
    '''*value* (an int, or text from ``-S``) as an int >= *minimum*
    (:func:`hpctestlib_ml.counts.count`); a :class:`BadInputError` naming
    ``-S name`` otherwise.'''
    number = count(value, minimum)
    if number is None:
        raise BadInputError(f'{name} must be an integer >= {minimum}, got '
                            f'{value!r}: fix -S {name}')
    return number


class ContainerError(ValueError):
    '''A container setting that cannot work; the message names the fix.'''
