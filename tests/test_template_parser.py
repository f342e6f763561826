"""The parser ``hpcml new-workload`` writes is a declaration of what the
program prints, not a copy of a parser: a few lines that the library's
step-line parser (:mod:`hpctestlib_ml.parsers.step_lines`) serves, and
which read the lines the new program writes."""
import importlib.util
import pathlib

import pytest

from hpctestlib_ml.commands import new_workload
from hpctestlib_ml.parsers.step_lines import StepLines

NAME, CHECK = 'tenth', 'Tenth'

#: The most lines the new workload's parser may have, its docstring
#: included (the template's was 53 before the step-line parser).
MOST_LINES = 20


@pytest.fixture(scope='module')
def written(tmp_path_factory):
    '''{path relative to the repository: text} of the files ``hpcml
    new-workload tenth`` writes.'''
    root = tmp_path_factory.mktemp('new')
    return {str(new.relative_to(root)): text
            for _, new, text in new_workload.plan(NAME, CHECK, root=root)}


def module(written, path, tmp_path):
    '''The module of *path* among the *written* files, imported.'''
    file = tmp_path / pathlib.Path(path).name
    file.write_text(written[path])
    spec = importlib.util.spec_from_file_location(
        f'_new_{file.stem}_{abs(hash(path))}', file)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_the_new_parser_is_short(written):
    lines = written[f'hpctestlib_ml/parsers/{NAME}.py'].splitlines()
    assert len(lines) <= MOST_LINES, f'{len(lines)} lines'


def test_the_new_parser_is_the_librarys_step_line_parser(written, tmp_path):
    parser = module(written, f'hpctestlib_ml/parsers/{NAME}.py', tmp_path)
    assert isinstance(parser.LOG, StepLines)
    assert parser.training_log.__func__ is StepLines.training_log
    assert parser.extract_metrics.__func__ is StepLines.extract_metrics


def test_the_new_parser_reads_what_the_new_program_prints(written,
                                                          tmp_path):
    '''The program's own line writers (``src/tenth/__init__.py``), on two
    ranks behind srun's labels: the first step is warm-up.'''
    parser = module(written, f'hpctestlib_ml/parsers/{NAME}.py', tmp_path)
    lines = module(written, f'src/{NAME}/__init__.py', tmp_path)
    printed = [lines.start_line(2, 4, 64, 2, 'fp32', 'cpu')]
    for step, (loss, seconds) in enumerate(
            [(1.0, 9.0), (0.5, 0.5), (0.25, 0.25), (0.125, 0.25)], 1):
        printed.append(lines.step_line(step, 4, loss, seconds, 8))
    printed.append('[hpcml] timed region 1700000000.5 1700000001.5')
    log = parser.training_log(''.join(f'0: {line}\n' for line in printed))
    assert (log.steps, log.world_size) == (4, 2)
    assert log.losses == [1.0, 0.5, 0.25, 0.125]
    assert log.timed_window == (1700000000.5, 1700000001.5)
    assert log.figures == {'samples_per_second': 24.0,
                           'samples_per_second_per_gpu': 12.0,
                           'time_per_step_secs': pytest.approx(1 / 3)}
    assert parser.extract_metrics('\n'.join(printed))['steps'] == 4


def test_the_new_check_reports_the_shared_figures(written):
    '''Its performance functions are the library's, not copies.'''
    text = written[f'hpctestlib_ml/workloads/{NAME}.py']
    assert '@performance_function' not in text
    for name in ('samples_per_second', 'samples_per_second_per_gpu',
                 'time_per_step_secs'):
        assert f'{name} = figures.{name}' in text
