"""ReFrame as ``hpcml suite`` runs it (``python -m
hpctestlib_ml.strict_reframe REFRAME-OPTION...``): ReFrame's own command,
with the warnings that hide a mistake made errors, each said in one line,
and the session stopped before anything is queued.

- a check path that does not exist (ReFrame: "check path ... does not
  exist", then nothing runs and the session passes);
- a test class or file that fails to load, e.g. on a broken references
  file (ReFrame: "skipping test ...", and the other tests run);
- a ``-S NAME=VALUE`` whose NAME is no variable of any selected test
  (ReFrame: "the following variables were not set"), with the closest
  name, or a parameter (select it with ``-n``), or a value the suite
  records rather than takes;
- a ``--mode`` the configuration does not define, with the modes it does
  (ReFrame: "invalid mode").

And after the run: results that could not be stored in the results
database (ReFrame: a warning, exit status 0) fail the session, naming the
database and the fix; the perflogs and the run report hold the results.

Plain ``reframe`` keeps ReFrame's behaviour. The hooks wrap ReFrame
4.10's logger (``LoggerAdapter.warning``), its configuration loader
(``reframe.core.config.load_config``), its check loader
(``RegressionCheckLoader``) and the ordering of the selected test cases
(``reframe.frontend.dependencies.toposort``, which every action passes
through after the test cases are selected).
"""
import os
import re
import sys

#: The prefix of every line this module says.
WHO = 'hpcml suite'


class Session:
    '''What the hooks found in this ReFrame session.'''

    def __init__(self, argv):
        self.argv = argv
        #: Mistakes found while loading: said before anything is queued.
        self.problems = []
        #: The check loader, for the ``-S`` values it was given.
        self.loader = None
        #: The names of every test class the loader loaded, selected or not.
        self.loaded = set()
        #: Why the results could not be stored in the database, or None.
        self.storage_error = None

    def stop_if_wrong(self):
        '''Say each problem found, in one line, and end the session.'''
        if self.problems:
            for problem in dict.fromkeys(self.problems):
                print(f'{WHO}: {problem}', file=sys.stderr)
            self.problems = []
            sys.exit(1)


def one_line(text):
    '''*text* on one line: whitespace runs (a YAML error's lines) become
    one space; ReFrame's hint to rerun with -v is left out.'''
    text = re.sub(r"\s*\(?rerun with '-v' for a backtrace\)?\s*$", '',
                  text.strip())
    # A user error's source lines (ReFrame's "| FILE:LINE | code | ^~~"):
    # where it is is enough.
    text = re.sub(r':?\s*\|\s*(\S+:\d+)\s*\|.*', r' (\1)', text, flags=re.S)
    return ' '.join(text.split())


#: The warnings that hide a mistake: pattern -> the problem said.
LOAD_WARNINGS = [
    (re.compile(r"check path '(?P<path>.*)' does not exist$", re.S),
     lambda m: f"check path {m['path']} does not exist: fix -c (the "
               f"suite's checks: {checks_dir()})"),
    (re.compile(r"skipping test file '(?P<file>[^']*)': (?P<why>.*)", re.S),
     lambda m: f"test file {m['file']} did not load: {one_line(m['why'])}: "
               f"fix it, or leave it out of -c"),
    (re.compile(r"skipping test '(?P<test>[^']*)': (?P<why>.*)", re.S),
     lambda m: f"test {m['test']} did not load: {one_line(m['why'])}: fix "
               f"it, or leave it out with -x {m['test']}"),
]

#: SQLite's words for a file that is not (or no longer) a database.
DAMAGED = re.compile(r'not a database|malformed|corrupt', re.I)

STORAGE_WARNING = re.compile(r'failed to store results in the database: '
                             r'(?P<why>.*)', re.S)


def checks_dir():
    from hpctestlib_ml.paths import CHECKS_DIR
    return CHECKS_DIR


def mode_asked(argv):
    '''The value of ``--mode`` in *argv*, or None.'''
    for i, arg in enumerate(argv):
        if arg == '--mode' and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith('--mode='):
            return arg.split('=', 1)[1]
    return None


def mode_problem(asked, modes):
    '''Why ``--mode`` *asked* is wrong in a configuration of *modes*, or
    None.'''
    from hpctestlib_ml.settings import closest
    if asked is None or asked in modes:
        return None
    return (f'--mode {asked}: no such mode{closest(asked, modes)}: use one '
            f'of {", ".join(modes) or "(none defined)"} (the modes of the '
            f'site configuration)')


def suite_test_names():
    '''The names of the suite's test classes, loaded this session or not
    (``checks/``: each declared workload's check and its container
    twin): a ``-S`` for one of them is no mistake in a session that
    runs others.'''
    from hpctestlib_ml import registry
    return {name for w in registry.registered().values()
            for name in (w.check, f'{w.check}Container')}


def variable_problems(external_vars, checks, loaded=()):
    '''One line for each ``-S`` name of *external_vars* that sets nothing
    in the selected tests *checks* (one test object per class): not a
    variable of any (with the closest name), a parameter, or a value the
    suite records. A name qualified with a class (``Class.name``) is
    checked against that class where it is selected; a class that none
    of the *loaded* test classes (selected or not) is named is a mistake
    too.'''
    from hpctestlib_ml import registry, settings
    classes = {type(c).__name__: type(c) for c in checks}
    recorded = registry.recorded()
    if not classes:
        return []
    known = set(loaded) | set(classes) | suite_test_names()
    problems = []
    for key, value in external_vars.items():
        if key.startswith('_rfm_'):
            continue
        owner, _, name = key.rpartition('.')
        if owner and owner not in known:
            problems.append(f'-S {key}: no test {owner} in the checks '
                            f'loaded{settings.closest(owner, known)}: fix '
                            f'the test name before the dot')
            continue
        if owner and owner not in classes:
            continue            # a test not selected this session
        chosen = [classes[owner]] if owner else list(classes.values())
        if name in recorded:
            problems.append(f'-S {key}: {name} is set by the suite itself '
                            f'(logged with every result), not a setting')
        elif any(name in cls.var_space for cls in chosen):
            continue
        elif any(name in cls.param_space.params for cls in chosen):
            owners = sorted(cls.__name__ for cls in chosen
                            if name in cls.param_space.params)
            problems.append(
                f'-S {key}: {name} is a parameter of {", ".join(owners)}, '
                f'not a variable: select its value with -n '
                f"'^{owners[0]}%.*{name}={value}'")
        else:
            names = {n for cls in chosen for n in cls.var_space
                     if not n.startswith('_')}
            where = owner or 'any selected test'
            readers = sorted(reader for n, reader in registry.all_variables()
                             if n == name)
            near = (f" (a variable of the {', '.join(readers)} checks, none "
                    f'selected)'
                    if readers else settings.closest(name, names))
            problems.append(f'-S {key}: no variable {name} in {where}{near}')
    return problems


def storage_problem(why):
    '''The line said when the results could not be stored.'''
    from reframe.core.runtime import runtime
    from reframe.utility import osext
    try:
        path = osext.expandvars(runtime().get_option(
            'storage/0/sqlite_db_file'))
    except Exception:            # no runtime: the configuration's own
        path = 'the results database'
    fix = (f'it is damaged: move it aside (mv {path} {path}.broken) and '
           f'the next session starts a new one' if DAMAGED.search(why) else
           'fix what stops it being written (its permissions, the disk)')
    return (f'the results of this session could not be stored in {path} '
            f'({one_line(why)}); they are in the perflogs and the run '
            f'report; {fix}')


def install(session):
    '''Hook *session* into ReFrame.'''
    import reframe.core.config as config
    import reframe.core.logging as rfm_logging
    import reframe.frontend.dependencies as dependencies
    import reframe.frontend.loader as loader

    warning = rfm_logging.LoggerAdapter.warning

    def strict_warning(self, message, *args, **kwargs):
        text = str(message)
        for pattern, problem in LOAD_WARNINGS:
            found = pattern.match(text)
            if found:
                session.problems.append(problem(found))
                return None
        found = STORAGE_WARNING.match(text)
        if found:
            session.storage_error = found['why']
        return warning(self, message, *args, **kwargs)

    rfm_logging.LoggerAdapter.warning = strict_warning

    load_config = config.load_config

    def checked_load_config(*filenames):
        try:
            site = load_config(*filenames)
        except SyntaxError as err:
            # ReFrame printed the import's whole traceback.
            raise config.ConfigError(
                f'{err.filename}, line {err.lineno}: {err.msg}: fix the '
                f'configuration file') from None
        if filenames != ('<builtin>',):
            try:
                modes = [m['name'] for m in site['modes']]
            except (KeyError, TypeError):
                modes = []
            problem = mode_problem(mode_asked(session.argv), modes)
            if problem:
                session.problems.append(problem)
                session.stop_if_wrong()
        return site

    config.load_config = checked_load_config

    check_loader = loader.RegressionCheckLoader
    init = check_loader.__init__

    def keep_loader(self, *args, **kwargs):
        init(self, *args, **kwargs)
        session.loader = self

    check_loader.__init__ = keep_loader
    load_all = check_loader.load_all

    def load_all_named(self, *args, **kwargs):
        checks = load_all(self, *args, **kwargs)
        session.loaded.update(type(c).__name__ for c in checks)
        return checks

    check_loader.load_all = load_all_named

    toposort = dependencies.toposort

    def checked_toposort(*args, **kwargs):
        testcases = toposort(*args, **kwargs)
        external = session.loader._external_vars if session.loader else {}
        session.problems += variable_problems(
            external, [case.check for case in testcases], session.loaded)
        session.stop_if_wrong()
        return testcases

    dependencies.toposort = checked_toposort


def main(argv=None):
    '''ReFrame's command line with the hooks; its exit status, 1 where a
    problem was found.'''
    argv = sys.argv[1:] if argv is None else list(argv)
    session = Session(argv)
    install(session)
    from reframe.frontend import cli
    sys.argv = [os.path.join(os.path.dirname(sys.executable), 'reframe'),
                *argv]
    try:
        cli.main()
        status = 0
    except SystemExit as done:
        status = done.code if isinstance(done.code, int) else (
            0 if done.code is None else 1)
    if session.problems:        # found after the last hook that says them
        session.stop_if_wrong()
    if session.storage_error is not None:
        print(f'{WHO}: {storage_problem(session.storage_error)}',
              file=sys.stderr)
        status = status or 1
    return status


if __name__ == '__main__':
    sys.exit(main())
