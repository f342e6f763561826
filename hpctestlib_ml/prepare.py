"""``hpcml prepare``: what the workloads would fetch from a hub, fetched
once on a machine with internet (a login node) into a directory the
compute nodes read offline.

Each workload's declaration says what it fetches
(:attr:`hpctestlib_ml.registry.Workload.prepare`). Only GPT-2 fine-tuning
needs anything at its benchmark and short sizes: the ``gpt2`` model and
tokenizer and the ``wikitext-2-raw-v1`` dataset
(:mod:`hpctestlib_ml.registry.gpt2_finetune.prepare`). The other workloads
train on synthetic or generated data (or a site's dataset, named in its
config).

The directory: ``-S prepared_dir=``, else the partition's
``extras['prepared_dir']``, else :data:`hpctestlib_ml.paths.PREPARED_DIR`
(``$HPCML_PREPARED_DIR``, else ``<HPCML_VAR_DIR>/prepared``); it must be
visible from the compute nodes.
"""


class PrepareError(Exception):
    '''Something to prepare is missing or cannot be fetched; the message
    names the fix.'''
