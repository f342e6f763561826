"""BERT's LAMB (src/bert_pretrain/lamb.py): the paper's per-tensor step, on
the device without waiting for it."""
import contextlib
import sys

import pytest
import torch

from conftest import REPO

sys.path.insert(0, str(REPO / 'src'))
from bert_pretrain import lamb  # noqa: E402


def per_tensor_lamb_step(params, state, lr, betas, eps, weight_decay):
    '''The oracle: LAMB (You et al. 2019, Algorithm 2) one tensor at a
    time, the trust ratio decided on the host (the program's step before
    it moved to the device).'''
    beta1, beta2 = betas
    for p in params:
        if p.grad is None:
            continue
        s = state.setdefault(p, {'step': 0, 'm': torch.zeros_like(p),
                                 'v': torch.zeros_like(p)})
        s['step'] += 1
        m, v, t = s['m'], s['v'], s['step']
        m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
        v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
        update = (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt() + eps)
        if weight_decay:
            update.add_(p, alpha=weight_decay)
        w_norm, u_norm = p.norm().item(), update.norm().item()
        trust = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        p.add_(update, alpha=-lr * trust)


def small_model(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(),
                                torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    # A tensor whose norm is 0 (trust ratio 1 from the first step on) and
    # one that never gets a gradient.
    torch.nn.init.zeros_(model[0].bias)
    model.register_parameter('unused', torch.nn.Parameter(torch.ones(3)))
    return model


def loss_of(model, step):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(32, 8, generator=g)
    y = torch.randn(32, 4, generator=g)
    return torch.nn.functional.mse_loss(model(x), y)


@pytest.mark.parametrize('weight_decay', [0.01, 0.0])
def test_step_equals_the_per_tensor_algorithm(weight_decay):
    settings = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-6,
                    weight_decay=weight_decay)
    ours, oracle = small_model(0), small_model(0)
    optimizer = lamb.Lamb(ours.parameters(), **settings)
    oracle_state = {}
    for step in range(6):
        for model in (ours, oracle):
            model.zero_grad(set_to_none=True)
            loss_of(model, step).backward()
        if step == 0:
            # The zero-norm bias: ||w|| = 0 at the first step.
            assert ours[0].bias.norm() == 0
        optimizer.step()
        with torch.no_grad():
            per_tensor_lamb_step(list(oracle.parameters()), oracle_state,
                                 **settings)
        for (name, a), b in zip(ours.named_parameters(), oracle.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7,
                                       msg=f'{name} at step {step}')
    assert ours.unused.grad is None and ours.unused not in optimizer.state
    assert not torch.equal(ours[0].bias, torch.zeros(16))


@contextlib.contextmanager
def host_reads_forbidden():
    '''Every way Python reads a tensor's value on the host (each a device
    synchronisation on a GPU) raises.'''
    def forbidden(self, *args, **kwargs):
        raise AssertionError('host read of a tensor in the optimizer step')

    names = ('item', 'tolist', '__bool__', '__float__', '__int__',
             '__index__')
    saved = {name: getattr(torch.Tensor, name) for name in names}
    try:
        for name in names:
            setattr(torch.Tensor, name, forbidden)
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


def test_step_reads_nothing_back_from_the_device():
    model = small_model(1)
    optimizer = lamb.Lamb(model.parameters(), lr=1e-2)
    for step in range(2):
        model.zero_grad()
        loss_of(model, step).backward()
        with host_reads_forbidden():
            optimizer.step()
    # The guard itself works.
    with host_reads_forbidden(), pytest.raises(AssertionError):
        float(torch.ones(()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
def test_step_does_not_synchronise_a_gpu():
    model = small_model(2).cuda()
    optimizer = lamb.Lamb(model.parameters(), lr=1e-2)
    x = torch.randn(32, 8, device='cuda')
    for _ in range(2):
        model.zero_grad()
        model(x).square().mean().backward()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode('error')
        try:
            optimizer.step()
        finally:
            torch.cuda.set_sync_debug_mode('default')
