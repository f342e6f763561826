"""LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning:
Training BERT in 76 minutes", Algorithm 2), the optimizer of MLPerf's BERT
reference: Adam's update scaled per parameter tensor by the trust ratio
||w|| / ||update||. Written from the paper; bias correction as in Adam."""
import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6,
                 weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group['betas']
            for p in group['params']:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state['step'] = 0
                    state['m'] = torch.zeros_like(p)
                    state['v'] = torch.zeros_like(p)
                state['step'] += 1
                m, v, t = state['m'], state['v'], state['step']
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                update = (m / (1 - beta1 ** t)) / (
                    (v / (1 - beta2 ** t)).sqrt() + group['eps'])
                if group['weight_decay']:
                    update.add_(p, alpha=group['weight_decay'])
                w_norm, u_norm = p.norm(), update.norm()
                trust = (w_norm / u_norm if w_norm > 0 and u_norm > 0
                         else torch.tensor(1.0))
                p.add_(update, alpha=-group['lr'] * float(trust))
