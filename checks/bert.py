"""BERT-Large pretraining, MLPerf Training style (:::MLLOG events)."""
import reframe as rfm

from hpctestlib_ml.workloads.bert import BERTLargeTraining


@rfm.simple_test
class BERTLarge(BERTLargeTraining):
    descr = 'BERT pretraining (BERT-Large at benchmark size), MLPerf-style logs'
    maintainers = ['hpcml']
    tags = {'bert', 'mlperf', 'nlp'}


@rfm.simple_test
class BERTLargeContainer(BERTLarge):
    descr = 'BERT pretraining in the PyTorch Apptainer image'
    runs_in_container = True
