"""The error a test variable or site setting that cannot work raises, and
the checks of count variables that raise it.

Not tied to a test object: the pure modules (:mod:`hpctestlib_ml.sizes`)
raise it too, and ReFrame shows its message as the case's one-line
failure.
"""
from reframe.core.exceptions import ReframeError


class BadInputError(ReframeError):
    '''A test variable or site setting that cannot work; the message names
    the fix.'''


def positive_int(name, value, minimum=1):
    '''*value* (an int, or text from ``-S``) as an int >= *minimum*; a
    :class:`BadInputError` naming ``-S name`` otherwise.'''
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < minimum or str(number) != str(value).strip():
        raise BadInputError(f'{name} must be an integer >= {minimum}, got '
                            f'{value!r}: fix -S {name}')
    return number
