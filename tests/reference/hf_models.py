"""Tiny random transformers models for the parity tests (torch + transformers, CPU)."""


def perturbed_hf_model(config_cls: str, model_cls: str, shapes: dict, extra: dict,
                       seed: int = 0):
    """`transformers.<model_cls>(<config_cls>(**shapes, **extra))` in eval mode, every weight
    (norms and biases too) perturbed by 0.1·N(0, 1) so no parameter sits at its default."""
    import torch
    import transformers
    config = getattr(transformers, config_cls)(**shapes, **extra)
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model
