"""TemplateWorkload: a multilayer perceptron regressing synthetic data
(the suite's template of a workload)."""
import reframe as rfm

from hpctestlib_ml.workloads.template_workload import TemplateWorkloadTraining


@rfm.simple_test
class TemplateWorkload(TemplateWorkloadTraining):
    descr = 'MLP regression on synthetic data (DDP)'
    maintainers = ['hpcml']
    tags = {'template_workload'}


@rfm.simple_test
class TemplateWorkloadContainer(TemplateWorkload):
    descr = 'MLP regression in the PyTorch image'
    runs_in_container = True
