"""Log parsers: pure functions from a training program's log text to metrics.

One module per upstream log format. They import only the standard library so
that ``hpcml extract`` and the ReFrame performance functions share them.
Each has ``training_log(text)``, a :class:`hpctestlib_ml.metrics.TrainingLog`
(what the checks read), and ``extract_metrics(text)``, that record as the
dict ``hpcml extract`` prints, under the keys each format has always had.
"""
from hpctestlib_ml.parsers import (hf_trainer, megatron, mllog, open_clip,
                                   tf_cnn_benchmarks)

#: Workload name -> function(text) -> dict of metrics (``hpcml extract``;
#: each parser's ``extract_metrics``).
EXTRACTORS = {
    'clip': open_clip.extract_metrics,
    'megatron': megatron.extract_metrics,
    'gpt2_finetune': hf_trainer.extract_metrics,
    'bert': mllog.extract_metrics,
    'cosmoflow': mllog.extract_metrics,
    'deeplabv3plus': mllog.extract_metrics,
    'alphafold2': mllog.extract_metrics,
    'resnet50': tf_cnn_benchmarks.extract_metrics,
}
