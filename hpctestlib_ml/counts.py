"""What a count is: the one rule of the integers >= a minimum that test
variables and site settings (:func:`hpctestlib_ml.errors.positive_int`) and
the command-line tools' options (:func:`hpctestlib_ml.commands.counting`)
take. Free of ReFrame, so that the tools stay so."""


def count(value, minimum=1):
    '''*value* (an int, or its text) as an int >= *minimum*; None where it
    is not one: text other than the number's own ("1.0", "01", "2x"), or a
    number below *minimum*. The one rule of the counts that settings
    (:func:`hpctestlib_ml.errors.positive_int`) and command-line options
    (:func:`hpctestlib_ml.commands.counting`) take.'''
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    if number < minimum or str(number) != str(value).strip():
        return None
    return number
