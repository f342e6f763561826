"""Log parsers: pure functions from a training program's log text to metrics.

One module per upstream log format. They import only the standard library so
that ``hpcml extract`` and the ReFrame performance functions share them.
Each has ``training_log(text)``, a :class:`hpctestlib_ml.metrics.TrainingLog`
(what the checks read), and ``extract_metrics(text)``, that record as the
dict ``hpcml extract`` prints, under the keys each format has always had.
"""
