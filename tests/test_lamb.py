"""BERT's LAMB (src/bert_pretrain/lamb.py): the step of MLPerf's BERT
reference (mlcommons/training aa344c7, retired_benchmarks/bert:
lamb_optimizer_v1.py and optimization.create_optimizer), on the device
without waiting for it."""
import contextlib
import json
import re
import sys

import numpy as np
import pytest
import torch

from conftest import DATA, REPO

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
    optimizer = lamb.Lamb(ours.parameters(), max_grad_norm=None, **settings)
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
    # Both kinds of group (trust ratio on and off) and the clip.
    optimizer = lamb.Lamb(
        lamb.parameter_groups(
            [(f'layer_norm.{n}' if n.startswith('2.') else n, p)
             for n, p in model.named_parameters()], 0.01),
        lr=1e-2, max_grad_norm=1.0)
    assert [len(g['params']) for g in optimizer.param_groups] == [3, 4]
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
    optimizer = lamb.Lamb(lamb.parameter_groups(model.named_parameters(),
                                                0.01), lr=1e-2)
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


# --- The reference's step: exclusions by name and the global-norm clip ---

#: optimization.create_optimizer's exclude_from_weight_decay, written out
#: here again so that the oracle does not read the code it checks.
REFERENCE_EXCLUDED = ['LayerNorm', 'layer_norm', 'bias']


class ReferenceLamb:
    '''NumPy transcription of the reference's training op for
    ``--optimizer=lamb`` (float32): ``tf.clip_by_global_norm(grads,
    clip_norm=1.0)`` over all gradients, then for each variable
    ``LAMBOptimizer._resource_apply_dense`` (weight decay unless the name
    matches an excluded pattern, trust ratio ``where(||w|| > 0,
    where(||u|| > 0, ||w||/||u||, 1), 1)`` unless excluded), then
    ``_finish``: the shared beta powers, beta^1 at the first step, times
    beta after each.'''

    def __init__(self, names, lr, beta1=0.9, beta2=0.999, eps=10 ** -6.0,
                 weight_decay_rate=0.01, clip_norm=1.0):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.rate, self.clip_norm = weight_decay_rate, clip_norm
        self.excluded = {n: any(re.search(r, n) is not None
                                for r in REFERENCE_EXCLUDED) for n in names}
        self.m, self.v = {}, {}
        self.beta1_power = np.float32(beta1)
        self.beta2_power = np.float32(beta2)

    def clip(self, grads):
        f32 = np.float32
        norm = np.sqrt(sum(np.sum(np.square(g), dtype=f32)
                           for g in grads.values()), dtype=f32)
        scale = f32(self.clip_norm) * min(f32(1) / norm,
                                          f32(1) / f32(self.clip_norm))
        return {n: g * scale for n, g in grads.items()}

    def step(self, variables, grads):
        '''Updates *variables* (name: float32 array) in place.'''
        f32 = np.float32
        for name, g in self.clip(grads).items():
            var = variables[name]
            m = self.m.get(name, np.zeros_like(var))
            v = self.v.get(name, np.zeros_like(var))
            m = m * f32(self.beta1) + g * f32(1 - self.beta1)
            v = v * f32(self.beta2) + (g * g) * f32(1 - self.beta2)
            self.m[name], self.v[name] = m, v
            update = (m / (f32(1) - self.beta1_power)) / (
                np.sqrt(v / (f32(1) - self.beta2_power)) + f32(self.eps))
            ratio = f32(1)
            if not self.excluded[name]:
                update = update + f32(self.rate) * var
                w_norm, u_norm = np.linalg.norm(var), np.linalg.norm(update)
                ratio = (w_norm / u_norm if w_norm > 0 and u_norm > 0
                         else f32(1))
            variables[name] = var - ratio * f32(self.lr) * update
        self.beta1_power = self.beta1_power * f32(self.beta1)
        self.beta2_power = self.beta2_power * f32(self.beta2)


def tiny_bert(seed):
    '''Our BERT pretraining model at a toy size: the real parameter names
    (LayerNorm weights and biases, dense biases, the output bias).'''
    from transformers import BertConfig
    from bert_pretrain.model import MLPerfBertPretraining
    torch.manual_seed(seed)
    return MLPerfBertPretraining(BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=16, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0))


def bert_loss(model, step):
    '''The pretraining loss of a fixed random batch; the loss of even
    steps x 100, of odd ones x 0.1: gradients of global norm above and
    below 1.'''
    from bert_pretrain.model import model_inputs, pretraining_loss
    g = torch.Generator().manual_seed(200 + step)
    batch = dict(input_ids=torch.randint(0, 40, (4, 12), generator=g),
                 token_type_ids=torch.zeros(4, 12, dtype=torch.long),
                 attention_mask=torch.ones(4, 12, dtype=torch.long),
                 masked_lm_positions=torch.randint(0, 12, (4, 3),
                                                   generator=g),
                 masked_lm_ids=torch.randint(0, 40, (4, 3), generator=g),
                 masked_lm_weights=torch.ones(4, 3),
                 next_sentence_labels=torch.randint(0, 2, (4,),
                                                    generator=g))
    loss = pretraining_loss(model(*model_inputs(batch)), batch)
    return loss * (100.0 if step % 2 == 0 else 0.1)


def global_norm(tensors):
    return torch.linalg.vector_norm(
        torch.stack([t.norm() for t in tensors])).item()


def test_step_equals_the_reference_transcription_on_bert():
    model = tiny_bert(0)
    names = [n for n, _ in model.named_parameters()]
    optimizer = lamb.Lamb(lamb.parameter_groups(model.named_parameters(),
                                                0.01), lr=0.02)
    reference = ReferenceLamb(names, lr=0.02)
    variables = {n: p.detach().numpy().copy()
                 for n, p in model.named_parameters()}
    norms = []
    for step in range(6):
        # The model holds the reference's variables: both take the same
        # gradients at the same point.
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(torch.from_numpy(variables[n]))
        model.zero_grad(set_to_none=True)
        bert_loss(model, step).backward()
        grads = {n: p.grad.numpy().copy()
                 for n, p in model.named_parameters()}
        norms.append(global_norm([p.grad for p in model.parameters()]))
        optimizer.step()
        reference.step(variables, grads)
        for n, p in model.named_parameters():
            np.testing.assert_allclose(p.detach().numpy(), variables[n],
                                       rtol=2e-6, atol=2e-7,
                                       err_msg=f'{n} at step {step}')
    # The steps clipped (norm > 1) and not (norm < 1), and both kinds of
    # tensor were there.
    assert min(norms[0::2]) > 1 > max(norms[1::2])
    assert 0 < sum(reference.excluded.values()) < len(names)


def test_step_equals_the_reference_tensorflow_optimizer():
    '''Against the reference's own LAMBOptimizer and clip, run by
    tests/data/bert/reference_lamb.py (TensorFlow 2.21, float32).'''
    run = json.loads((DATA / 'bert' / 'reference_lamb.json').read_text())
    params = {n: torch.nn.Parameter(torch.tensor(v))
              for n, v in run['init'].items()}
    optimizer = lamb.Lamb(lamb.parameter_groups(params.items(), 0.01),
                          lr=run['lr'], betas=(0.9, 0.999), eps=1e-6,
                          max_grad_norm=1.0)
    for step, (grads, after) in enumerate(zip(run['grads'], run['after'])):
        for n, p in params.items():
            p.grad = torch.tensor(grads[n])
        optimizer.step()
        for n, p in params.items():
            torch.testing.assert_close(p.detach(), torch.tensor(after[n]),
                                       rtol=2e-6, atol=1e-6,
                                       msg=f'{n} at step {step}')


#: Our parameter name -> the reference's TensorFlow variable name, in
#: order: the renames transformers' load_tf_weights_in_bert undoes.
TO_REFERENCE_NAME = [
    (r'^pretraining\.', ''),
    (r'\.layer\.(\d+)\.', r'.layer_\1.'),
    (r'LayerNorm\.weight$', 'LayerNorm.gamma'),
    (r'LayerNorm\.bias$', 'LayerNorm.beta'),
    (r'^cls\.predictions\.bias$', 'cls.predictions.output_bias'),
    (r'^cls\.seq_relationship\.weight$',
     'cls.seq_relationship.output_weights'),
    (r'^cls\.seq_relationship\.bias$', 'cls.seq_relationship.output_bias'),
    (r'_embeddings\.weight$', '_embeddings'),
    (r'\.weight$', '.kernel'),
]


def reference_name(ours):
    for pattern, replacement in TO_REFERENCE_NAME:
        ours = re.sub(pattern, replacement, ours)
    return ours.replace('.', '/')


def reference_variables():
    '''{name: shape} of the reference's trainable variables, BERT-Large
    (tests/data/bert/reference_variables.txt, printed by the reference
    graph: reference_variables.py).'''
    variables = {}
    for line in (DATA / 'bert' / 'reference_variables.txt').read_text() \
            .splitlines():
        name, shape = line.split(' ', 1)
        variables[name.removesuffix(':0')] = tuple(json.loads(shape))
    return variables


def test_bert_large_groups_are_the_references():
    from bert_pretrain.model import build
    with torch.device('meta'):
        model = build('bert-large')
    named = list(model.named_parameters())
    reference = reference_variables()
    # Our 398 tensors are the reference's, one for one (dense kernels are
    # stored transposed).
    ours = {}
    for n, p in named:
        name = reference_name(n)
        ours[name] = tuple(p.shape)[::-1 if name.endswith('kernel') else 1]
    assert ours == reference

    decayed, plain = lamb.parameter_groups(named, 0.01)
    assert (decayed['weight_decay'], decayed['trust_ratio']) == (0.01, True)
    assert (plain['weight_decay'], plain['trust_ratio']) == (0.0, False)
    name_of = {id(p): reference_name(n) for n, p in named}
    excluded = {n for n in reference
                if any(re.search(r, n) for r in REFERENCE_EXCLUDED)}
    assert {name_of[id(p)] for p in plain['params']} == excluded
    assert {name_of[id(p)] for p in decayed['params']} == \
        set(reference) - excluded
    # 24 layers x (6 biases + 2 LayerNorms) + embedding LayerNorm, pooler
    # bias, transform bias and LayerNorm, output bias, next-sentence bias.
    assert len(plain['params']) == 24 * 10 + 2 + 1 + 3 + 1 + 1 == 248


def test_gradients_above_norm_1_are_scaled_to_norm_1():
    torch.manual_seed(3)
    params = [torch.nn.Parameter(torch.randn(5, 4)),
              torch.nn.Parameter(torch.randn(7))]
    optimizer = lamb.Lamb(params, lr=0.0, betas=(0.9, 0.999))
    for scale, clipped in ((10.0, True), (0.01, False)):
        grads = [torch.randn_like(p) for p in params]
        norm = global_norm(grads)
        for p, g in zip(params, grads):
            p.grad = g * scale / norm
        optimizer.step()
        expected = 1.0 if clipped else scale
        assert global_norm([p.grad for p in params]) == \
            pytest.approx(expected, rel=1e-6)
        for p, g in zip(params, grads):
            # The direction is kept; the moments took the clipped value.
            torch.testing.assert_close(p.grad, g * expected / norm)
        optimizer.state.clear()
        optimizer.step()
        for p in params:
            torch.testing.assert_close(optimizer.state[p]['m'], 0.1 * p.grad)
