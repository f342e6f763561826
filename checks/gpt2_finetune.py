"""GPT-2 fine-tuning on WikiText-2 with Hugging Face Trainer (run_clm)."""
import reframe as rfm

from hpctestlib_ml.workloads.gpt2_finetune import GPT2FineTuneTraining


@rfm.simple_test
class GPT2FineTune(GPT2FineTuneTraining):
    descr = 'GPT-2 causal-LM fine-tuning on WikiText-2 (HF Trainer)'
    maintainers = ['hpcml']
    tags = {'gpt2', 'huggingface', 'llm', 'finetune'}


@rfm.simple_test
class GPT2FineTuneContainer(GPT2FineTune):
    descr = 'GPT-2 fine-tuning on WikiText-2 in the PyTorch Apptainer image'
    runs_in_container = True
