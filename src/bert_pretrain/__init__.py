"""BERT pretraining (masked LM + next-sentence prediction) with
transformers' BertForPreTraining, logged as MLPerf Training does
(``:::MLLOG`` lines from the mlperf-logging package)."""
