"""Causal-LM fine-tuning of GPT-2 on WikiText-2 with Hugging Face Trainer,
the workload of transformers' run_clm example (written for this suite:
run_clm.py is not in the wheel)."""
