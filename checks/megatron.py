"""GPT pretraining with Megatron (the CARAML LLM benchmark).

GPU partitions: Megatron-LM's pretrain_gpt.py at CARAML's 800M, 13B and
175B sizes (TP/PP 1/1, 2/2, 8/8), sequence 2048, Llama 3 8B and 70B and
GPT-J 6B. CPU partitions: the tiny model through Megatron-Core, same
arguments and log line.
"""
import reframe as rfm

from hpctestlib_ml.workloads.megatron import MegatronGPTTraining


@rfm.simple_test
class MegatronGPT(MegatronGPTTraining):
    descr = 'GPT pretraining with Megatron (CARAML sizes at benchmark size)'
    maintainers = ['hpcml']
    tags = {'megatron', 'gpt', 'llm', 'caraml'}


@rfm.simple_test
class MegatronGPTContainer(MegatronGPT):
    descr = 'GPT pretraining with Megatron in the PyTorch Apptainer image'
    runs_in_container = True
