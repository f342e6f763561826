"""``python -m hpctestlib_ml.venv_config``: make ``config/local.py`` the
configuration that ReFrame finds inside the project's environment.

Without a configuration ReFrame runs its built-in ``generic`` system, whose
only partition offers none of the features the checks need: ``reframe -c
checks -r`` found 0 checks there and exited 0. ``make setup`` runs this
module in ``.venv``; it writes a ``.pth`` file into the environment's
site-packages that, at interpreter start, sets ``RFM_CONFIG_FILES`` to
``config/local.py`` where the user named no configuration
(``RFM_CONFIG_FILES``, ``RFM_CONFIG_FILE`` or ``RFM_CONFIG_PATH``). ``-C``
still wins, as it does over ``RFM_CONFIG_FILES``. So ``.venv/bin/reframe
-c checks -r``, or ``reframe -c checks -r`` with the environment
activated, runs the CPU smoke suite with the suite's perflog format,
results database and ``var/`` directory, which ReFrame's generic system
has none of.

Outside that environment, a ReFrame on the ``generic`` system says in one
line what to pass (:func:`hpctestlib_ml.plugins.placement.warn_if_no_partition_fits`).
"""
import os
import sysconfig

from hpctestlib_ml.paths import CONFIG_DIR

PTH_NAME = 'hpcml-reframe-config.pth'

_VARIABLES = ('RFM_CONFIG_FILES', 'RFM_CONFIG_FILE', 'RFM_CONFIG_PATH')


def pth_line(config_file):
    '''The ``.pth`` line: one ``import`` statement, as site.py requires.'''
    named = ' or '.join(f'os.environ.get({v!r})' for v in _VARIABLES)
    return (f'import os; {named} or os.environ.__setitem__('
            f'"RFM_CONFIG_FILES", {str(config_file)!r})\n')


def write_pth(site_packages=None, config_file=None):
    site_packages = site_packages or sysconfig.get_paths()['purelib']
    config_file = config_file or CONFIG_DIR / 'local.py'
    path = os.path.join(site_packages, PTH_NAME)
    with open(path, 'w') as fp:
        fp.write(pth_line(config_file))
    return path


if __name__ == '__main__':
    print(f'ReFrame in this environment defaults to -C '
          f'{CONFIG_DIR / "local.py"} ({write_pth()})')
