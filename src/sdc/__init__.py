"""The same answer on every rank: what ``python -m sdc`` (the
``SilentDataCorruption`` component check) computes, digests and compares,
so that a device that computes wrongly without failing (silent data
corruption) is named.

Silent data corruption is rare and real: the fleet studies of 2021 found
processors that compute wrongly without an error in about one machine in
a thousand (H. D. Dixit et al., "Silent Data Corruptions at Scale",
arXiv:2102.11245; P. H. Hochschild et al., "Cores that don't count",
HotOS 2021), and Microsoft's SuperBench trains its model benchmarks
deterministically for it (``--enable_determinism``, its model-benchmarks
documentation). A wrong answer shows only beside a right one: here every
rank computes the same thing from the same seed, bit for bit, and the
answers are compared.

What every rank computes, from :data:`SEED`, in each precision (the
device's ones: bf16, fp16, tf32, fp32 on a GPU; fp32 on a CPU):

- ``products`` square ``torch.mm`` products of random normal matrices
  (``matmul_rate.operands``: the matrices the ``MatmulRate`` check
  multiplies, each product from its own seed, :func:`operand_seed`);
- one training step of a small model (:func:`training_step`): a
  two-layer perceptron with a GELU and a layer norm, its mean squared
  error against random targets, its gradients, and its weights after one
  AdamW step; under ``torch.autocast`` for bf16 and fp16.

Each result (an *item*) is digested: the first :data:`DIGEST_CHARS` hex
digits of the SHA-256 of its bytes (:func:`digest`), as the device left
them. Bit-identical results need a deterministic computation
(:func:`make_deterministic`): ``torch.use_deterministic_algorithms``, cuDNN
without autotuning and cuBLAS with a fixed workspace
(``CUBLAS_WORKSPACE_CONFIG=:4096:8``, NVIDIA's condition for
reproducible cuBLAS results: "cuBLAS Library User Guide", Results
reproducibility); on CPUs the same number of threads on every rank.

Where ranks' digests of an item differ, :func:`exchange_plan` says which
ranks send their result to which, and the receiver measures by how much
its own differs (:func:`difference`): the elements not bit-identical and
their largest relative error.

Standard library and torch only: it runs on compute nodes and in the
containers, with ``PYTHONPATH=src``.
"""
import collections
import hashlib
import math

import matmul_rate

#: What is computed: raised when the computation changes, so that a
#: known-good digest of another version is never compared with this one's
#: (the check prefixes its digests with it: ``v1:...``).
VERSION = 1

#: The seed every rank starts from.
SEED = 20261128

#: Hex digits of SHA-256 kept per digest: 64 bits, enough that two
#: different results never share one by chance.
DIGEST_CHARS = 16

#: The width of the model's output (its regression targets).
OUTPUTS = 16

#: The variable cuBLAS reads for a fixed workspace (reproducible results
#: across runs and streams), and its value.
CUBLAS_WORKSPACE = ('CUBLAS_WORKSPACE_CONFIG', ':4096:8')

#: Every precision the program knows, in the order their seeds are
#: numbered (:func:`operand_seed`).
PRECISIONS = tuple(matmul_rate.PRECISIONS)

#: What a GPU and a CPU compute in by default (``MatmulRate``'s).
GPU_PRECISIONS = matmul_rate.GPU_PRECISIONS
CPU_PRECISIONS = matmul_rate.CPU_PRECISIONS


def make_deterministic(env):
    '''Set what makes the ranks' results bit-identical, before any device
    work: cuBLAS's fixed workspace in *env* (``os.environ``; read when the
    first cuBLAS handle is made), deterministic algorithms (an operation
    without one raises rather than differ), cuDNN without autotuning.'''
    import torch
    name, value = CUBLAS_WORKSPACE
    env[name] = value
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def operand_seed(precision, product, seed=SEED):
    '''The seed of product *product* (1, 2, ...) in *precision*: the same
    whichever precisions a run computes.'''
    return seed + 1000 * PRECISIONS.index(precision) + product


def digest(flat):
    '''The digest of the 1-D contiguous tensor *flat*: SHA-256 of its
    bytes as the device left them, :data:`DIGEST_CHARS` hex digits.'''
    import torch
    raw = flat.detach().view(torch.uint8).cpu().numpy()
    return hashlib.sha256(raw.data).hexdigest()[:DIGEST_CHARS]


def flat(tensor):
    '''*tensor* as a 1-D contiguous tensor (a scalar loss as one element),
    as it is digested and sent.'''
    return tensor.detach().reshape(-1).contiguous()


def products(n, precision, count, device, seed=SEED):
    '''``(item, result)`` of *count* products of ``n x n`` matrices in
    *precision*, each from :func:`operand_seed` (``matmul_rate.operands``
    sets the math mode: TF32 products for ``tf32`` only).'''
    import torch
    for product in range(1, count + 1):
        a, b, out = matmul_rate.operands(
            n, precision, device, seed=operand_seed(precision, product,
                                                    seed))
        torch.mm(a, b, out=out)
        del a, b
        yield f'matmul {precision} #{product}', flat(out)


#: Precision -> the autocast dtype of its training step (None: fp32, in
#: the math mode of ``matmul_rate.PRECISIONS``).
AUTOCAST = {'bf16': 'bfloat16', 'fp16': 'float16', 'tf32': None,
            'fp32': None}


def training_step(precision, width, batch, device, seed=SEED):
    '''``(item, result)`` of one training step of the perceptron
    ``linear(width, width) -> GELU -> layer norm -> linear(width,
    OUTPUTS)`` on a batch of *batch* random inputs, its mean squared error
    against random targets: the loss, the gradients (in the parameters'
    order, concatenated), the weights after one AdamW step. Parameters
    and data come from a generator on *device* seeded from *seed*.'''
    import contextlib

    import torch
    import torch.nn.functional as F
    generator = torch.Generator(device).manual_seed(
        seed + 1000 * PRECISIONS.index(precision))

    def normal(*shape, scale=1.0):
        return torch.randn(*shape, device=device,
                           generator=generator) * scale

    if device.type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = precision == 'tf32'
    params = [normal(width, width, scale=width ** -0.5),
              torch.zeros(width, device=device),
              torch.ones(width, device=device),
              torch.zeros(width, device=device),
              normal(OUTPUTS, width, scale=width ** -0.5),
              torch.zeros(OUTPUTS, device=device)]
    for p in params:
        p.requires_grad_(True)
    inputs, targets = normal(batch, width), normal(batch, OUTPUTS)
    dtype = AUTOCAST[precision]
    mixed = (torch.autocast(device.type, dtype=getattr(torch, dtype))
             if dtype else contextlib.nullcontext())
    w1, b1, gamma, beta, w2, b2 = params
    with mixed:
        hidden = F.gelu(F.linear(inputs, w1, b1))
        hidden = F.layer_norm(hidden, (width,), gamma, beta)
        outputs = F.linear(hidden, w2, b2)
    loss = F.mse_loss(outputs.float(), targets)
    loss.backward()
    grads = torch.cat([p.grad.reshape(-1) for p in params])
    torch.optim.AdamW(params, lr=1e-3).step()
    weights = torch.cat([p.detach().reshape(-1) for p in params])
    return [(f'step {precision} loss', flat(loss)),
            (f'step {precision} grads', flat(grads)),
            (f'step {precision} weights', flat(weights))]


def exchange_plan(digests):
    '''``[(sender, receiver)]``: which rank sends its result to which, so
    that every rank whose digest (*digests*, by rank) differs measures by
    how much. Where more than half the ranks agree, each other rank
    receives the lowest such rank's result (the majority's); where none
    do (two ranks that disagree, or a split), each rank that differs from
    rank 0 receives rank 0's, and rank 0 the lowest rank's of each other
    answer, so that whichever rank is wrong has measured itself against
    another. [] where all agree.'''
    counts = collections.Counter(digests)
    top, agreeing = counts.most_common(1)[0]
    if agreeing == len(digests):
        return []
    if 2 * agreeing > len(digests):
        majority = digests.index(top)
        return [(majority, rank) for rank, d in enumerate(digests)
                if d != top]
    plan = [(0, rank) for rank, d in enumerate(digests) if d != digests[0]]
    firsts = {}
    for rank, d in enumerate(digests):
        if d != digests[0]:
            firsts.setdefault(d, rank)
    return plan + [(rank, 0) for rank in firsts.values()]


#: Element size in bytes -> the integer type its bits are compared as.
_BITS = {1: 'uint8', 2: 'int16', 4: 'int32', 8: 'int64'}


def difference(mine, theirs):
    '''``(elements that differ, elements, max relative error)`` of the
    1-D tensor *mine* against *theirs* (same shape and type): the elements
    whose bits differ, and the largest ``|mine - theirs| / |theirs|`` over
    them (``inf`` where *theirs* is 0 there or either is not finite; 0.0
    where none differ).'''
    import torch
    bits = getattr(torch, _BITS[mine.element_size()])
    differs = mine.view(bits) != theirs.view(bits)
    count = int(differs.sum())
    if not count:
        return 0, mine.numel(), 0.0
    x, y = mine[differs].double(), theirs[differs].double()
    relative = ((x - y).abs() / y.abs()).nan_to_num(nan=math.inf,
                                                   posinf=math.inf)
    return count, mine.numel(), float(relative.max())
