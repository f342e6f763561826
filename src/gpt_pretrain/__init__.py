"""GPT pretraining: Megatron-LM's pretrain_gpt.py where it is installed, else
Megatron-Core's GPTModel trained by :mod:`gpt_pretrain.mcore_train`, which
takes the same arguments and prints the same iteration line."""
