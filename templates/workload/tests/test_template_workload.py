"""TemplateWorkload: its program trains (the loss falls) and prints what
its parser reads, on one rank and two; its analytic FLOPs are those of
the model it builds."""
import pytest

from conftest import extract, run_module
from hpctestlib_ml import model_info, registry
from hpctestlib_ml.parsers import template_workload as parser


def test_the_program_trains_and_its_log_is_read(tmp_path):
    proc = run_module(tmp_path, 'template_workload', '--cpu', '--steps', 8)
    log = parser.training_log(proc.stdout)
    assert (log.steps, log.world_size) == (8, 1)
    assert log.loss_last < log.loss_first
    assert log.figures['samples_per_second'] > 0
    assert log.timed_window is not None
    assert extract('template_workload', proc.stdout)['steps'] == 8


def test_two_ranks_say_their_world(tmp_path):
    proc = run_module(tmp_path, 'template_workload', '--cpu', '--steps', 4,
                      procs=2)
    log = parser.training_log(proc.stdout)
    assert log.world_size == 2
    assert log.figures['samples_per_second_per_gpu'] == pytest.approx(
        log.figures['samples_per_second'] / 2)


def test_the_analytic_flops_are_the_models():
    info = model_info.model_info(registry.get('template_workload'), 'tiny')
    assert info.flops_ratio == pytest.approx(1, rel=0.01)
