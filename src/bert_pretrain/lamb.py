"""LAMB as MLPerf Training's BERT reference applies it.

The reference: mlcommons/training ``retired_benchmarks/bert/`` at aa344c7
(``language_model/tensorflow/bert/`` before BERT was retired),
``lamb_optimizer_v1.py`` (``LAMBOptimizer``) and ``optimization.py``
(``create_optimizer``). Per tensor, with its first and second moments m, v
and the step t:

    update = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
             + weight_decay * w                  (decayed tensors only)
    ratio  = ||w|| / ||update||   if both > 0, else 1   (adapted only)
    w     -= lr * ratio * update

Tensors whose name contains ``LayerNorm``, ``layer_norm`` or ``bias``
(``re.search``, ``exclude_from_weight_decay``) get neither the weight decay
nor the trust ratio: ``exclude_from_layer_adaptation`` defaults to the same
list. Before the update the gradients of all tensors are scaled together
so that their global L2 norm is at most 1.0 (``tf.clip_by_global_norm(grads,
clip_norm=1.0)``). :func:`parameter_groups` builds the two groups, and
:class:`Lamb` takes ``max_grad_norm`` for the clip.

Where the clip sits in a data-parallel run: the reference's default (its
flag ``clip_by_global_norm_after_gradient_allreduce`` is False, "how the
model was pre-trained") clips each replica's local gradient, and the
MirroredStrategy/TPU all-reduce then sums the clipped gradients. Here the
optimizer sees DDP's averaged gradient and clips that, as the reference
does with that flag set and as NVIDIA's submissions do with
``clip_after_ar`` (``DistributedFusedLAMB``). With one process both are
the reference's step exactly.

The step never waits for the device: the clip factor and the trust ratio
are tensors (``torch.where``, no ``if`` on a norm, no ``float()``), and the
tensors of a group are updated together by ``torch._foreach_*`` ops, as
``torch.optim.Adam``'s foreach path does. The step count is a Python int,
so the bias corrections are host numbers.
"""
import re

import torch

#: The reference's ``exclude_from_weight_decay`` (and, by default,
#: ``exclude_from_layer_adaptation``): patterns searched in a tensor's name.
EXCLUDE_FROM_WEIGHT_DECAY = ('LayerNorm', 'layer_norm', 'bias')


def excluded(name):
    '''Whether the reference exempts the tensor *name* from weight decay
    and the trust ratio (``_do_use_weight_decay`` is False).'''
    return any(re.search(pattern, name)
               for pattern in EXCLUDE_FROM_WEIGHT_DECAY)


def parameter_groups(named_parameters, weight_decay):
    '''Two param groups for :class:`Lamb` from (name, tensor) pairs: the
    decayed and adapted tensors, and those the reference excludes (weight
    decay 0, trust ratio 1).'''
    decayed, plain = [], []
    for name, p in named_parameters:
        (plain if excluded(name) else decayed).append(p)
    return [dict(params=decayed, weight_decay=weight_decay,
                 trust_ratio=True),
            dict(params=plain, weight_decay=0.0, trust_ratio=False)]


def clip_by_global_norm_(grads, max_norm):
    '''Scales *grads* in place by ``max_norm * min(1/norm, 1/max_norm)``,
    norm the L2 norm of all of them together: TensorFlow's
    ``clip_by_global_norm``. Without a host read: the factor stays a
    tensor.'''
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    scale = max_norm * torch.clamp(norm.reciprocal(), max=1 / max_norm)
    torch._foreach_mul_(grads, scale)


class Lamb(torch.optim.Optimizer):
    '''LAMB over param groups with ``weight_decay`` and ``trust_ratio``
    (default: decay *weight_decay*, ratio on; see :func:`parameter_groups`),
    the gradients clipped to global norm *max_norm* first (``None``: no
    clip).'''

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6,
                 weight_decay=0.01, max_grad_norm=1.0):
        self.max_grad_norm = max_grad_norm
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay,
                                      trust_ratio=True))

    @torch.no_grad()
    def step(self, closure=None):
        groups = [(group, [p for p in group['params'] if p.grad is not None])
                  for group in self.param_groups]
        if self.max_grad_norm is not None:
            grads = [p.grad for _, params in groups for p in params]
            if grads:
                clip_by_global_norm_(grads, self.max_grad_norm)
        for group, params in groups:
            if params:
                self._update(group, params)

    def _update(self, group, params):
        beta1, beta2 = group['betas']
        grads, ms, vs = [p.grad for p in params], [], []
        for p in params:
            state = self.state[p]
            if not state:
                state['step'] = 0
                state['m'] = torch.zeros_like(p)
                state['v'] = torch.zeros_like(p)
            state['step'] += 1
            ms.append(state['m'])
            vs.append(state['v'])
        # Tensors of a group share their step count unless some had no
        # gradient in earlier steps: then correct each with its own.
        steps = [self.state[p]['step'] for p in params]

        torch._foreach_mul_(ms, beta1)
        torch._foreach_add_(ms, grads, alpha=1 - beta1)
        torch._foreach_mul_(vs, beta2)
        torch._foreach_addcmul_(vs, grads, grads, value=1 - beta2)

        # update = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
        updates = torch._foreach_div(ms, [1 - beta1 ** t for t in steps])
        denominators = torch._foreach_div(vs, [1 - beta2 ** t for t in steps])
        torch._foreach_sqrt_(denominators)
        torch._foreach_add_(denominators, group['eps'])
        torch._foreach_div_(updates, denominators)
        del denominators
        if group['weight_decay']:
            torch._foreach_add_(updates, params, alpha=group['weight_decay'])
        if group['trust_ratio']:
            self._scale_by_trust_ratio(params, updates)
        torch._foreach_add_(params, updates, alpha=-group['lr'])

    @staticmethod
    def _scale_by_trust_ratio(params, updates):
        '''updates *= ||w|| / ||update|| per tensor, 1 where either norm
        is 0.'''
        w_norms = torch.stack(torch._foreach_norm(params))
        u_norms = torch.stack(torch._foreach_norm(updates))
        trust = torch.where((w_norms > 0) & (u_norms > 0),
                            w_norms / u_norms, torch.ones_like(w_norms))
        torch._foreach_mul_(updates, list(trust.unbind()))
