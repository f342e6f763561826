"""CLIP training program of the suite: OpenCLIP's own trainer, unchanged.

``python -m clip_train <open_clip_train arguments>`` runs
:func:`open_clip_train.main.main` (the program the MMoCLIP benchmark runs) with
two additions that change nothing on GPUs:

* the model configs shipped in :mod:`clip_train.model_configs` (``CLIP-tiny``
  for CPU smoke runs) are registered with OpenCLIP, so they are selected with
  ``--model NAME`` like any built-in model;
* DistributedDataParallel works on CPU ranks (see :mod:`clip_train.cpu_ddp`).

It needs nothing but ``PYTHONPATH=src``, so it runs unchanged inside a
container with the repository bind-mounted.
"""
import pathlib

#: The suite's OpenCLIP model configs (``CLIP-tiny``), registered with
#: OpenCLIP before it builds a model.
MODEL_CONFIGS = pathlib.Path(__file__).parent / 'model_configs'
