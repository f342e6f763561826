"""The precisions of the suite's own programs, and how the workloads choose
theirs (docs/guide/fidelity.md, "Precision").

Each MLPerf-style workload's declaration (:class:`hpctestlib_ml.registry.
PrecisionChoice`) says what its benchmark size trains in and what its
upstream reference program does, with the sources. The reference programs
(mlcommons/hpc 2c627d4, mlcommons/training's BERT aa344c7) train in fp32;
the closed-division submissions that centres compare with train mixed.
The benchmark size follows the submissions, since that is the figure a
centre holds its system against; the reference's precision is one ``-S
precision=`` away, and the perflog carries both (``precision``,
``reference_precision``).

Precision names are the programs' (``--precision``): ``fp16`` and
``bf16`` are autocast mixed precision with fp32 weights (fp16 with a loss
scaler), ``fp32`` trains fp32 with TF32 matmuls on GPUs that have them,
as the references' ``tf32`` default (OpenFold) and PyTorch's convolution
default do (``src/device_choice.set_math_mode``).
"""
#: The precisions of the suite's own programs (their ``--precision``
#: choices: ``src/mlperf_train``, ``bert_pretrain``, ``gpt2_finetune``,
#: ``resnet50_tf``, ``collectives``; ``gpt_pretrain``'s ``--fp16`` and
#: ``--bf16``, fp32 without either).
PROGRAM = ('fp32', 'fp16', 'bf16')
