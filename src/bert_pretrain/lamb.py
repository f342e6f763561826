"""LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning:
Training BERT in 76 minutes", Algorithm 2), the optimizer of MLPerf's BERT
reference: Adam's update scaled per parameter tensor by the trust ratio
||w|| / ||update||. Written from the paper; bias correction as in Adam.

The step never waits for the device: the trust ratio is chosen with
``torch.where`` on the device (no ``if`` on a norm, no ``float()``), and
the tensors of a group are updated together by ``torch._foreach_*`` ops,
as ``torch.optim.Adam``'s foreach path does (a few kernels per group
instead of about 15 per tensor). The step count is a Python int, so the
bias corrections are host numbers as in Adam's non-capturable path.
"""
import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6,
                 weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params = [p for p in group['params'] if p.grad is not None]
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

        # Trust ratio ||w|| / ||update||, 1 where either norm is 0.
        w_norms = torch.stack(torch._foreach_norm(params))
        u_norms = torch.stack(torch._foreach_norm(updates))
        trust = torch.where((w_norms > 0) & (u_norms > 0),
                            w_norms / u_norms, torch.ones_like(w_norms))
        torch._foreach_mul_(updates, list(trust.unbind()))
        torch._foreach_add_(params, updates, alpha=-group['lr'])
