"""A history read back from VictoriaMetrics (``hpcml report --tsdb URL``):
every series the suite sent (:mod:`.series`), of one system or all, raw
samples through ``/api/v1/export`` and its PromQL series selector, made
runs again, so that one report spans every system a centre sends."""
import urllib.error
import urllib.parse
import urllib.request

from hpctestlib_ml.report import history
from hpctestlib_ml.tsdb import series

#: Seconds to wait for the database's answer.
TIMEOUT = 60.0


class TsdbError(ValueError):
    '''The database cannot be read, with the fix.'''


def selector(system=None):
    '''The PromQL series selector of the suite's series (of *system*, a
    ``system`` or ``system:partition``).'''
    matchers = [f'__name__=~"{series.PREFIX}.+"']
    if system:
        name, _, partition = system.partition(':')
        matchers.append(f'system="{name}"')
        if partition:
            matchers.append(f'partition="{partition}"')
    return '{' + ','.join(matchers) + '}'


def read_history(base, system=None):
    '''A :class:`~hpctestlib_ml.report.history.History` of the runs the
    database at *base* holds (of *system*).'''
    query = urllib.parse.urlencode({'match[]': selector(system)})
    address = f'{base.rstrip("/")}/api/v1/export?{query}'
    try:
        with urllib.request.urlopen(address, timeout=TIMEOUT) as answer:
            text = answer.read().decode()
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise TsdbError(f'--tsdb {base}: cannot read the database '
                        f'({getattr(err, "reason", err)}): give the base URL '
                        f'of a VictoriaMetrics that answers (http://host:'
                        f'8428)') from None
    return history.History(runs=runs_of(text), files=[base])


def runs_of(exported):
    '''The :class:`~hpctestlib_ml.report.history.Run` of VictoriaMetrics'
    export (:func:`.series.records_of`).'''
    return [history.Run(r['time'], r['system'], r['partition'],
                        r['display_name'], r['result'], r['params'],
                        {name: history.Metric(parts['value'],
                                              parts.get('unit', ''),
                                              parts.get('ref', 0.0),
                                              parts.get('lower_thres'),
                                              parts.get('upper_thres'))
                         for name, parts in r['figures'].items()})
            for r in series.records_of(exported)]
