"""fixtures/crossfile/registry at runtime: models built by name from a project registry (a dict of
classes, or one a decorator fills) and trained on loader batches. The classes that checkpoint their
stem reentrantly on the raw batch never train the stem (its parameters keep `.grad = None`, FINDINGS
1A); without checkpointing they do. The non-reentrant backbone and the encoder that projects first train it."""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import NO_INPUT_GRAD_WARNING, capture_warnings, load_fixture_package, no_checkpointing, warning_texts  # noqa: E402, F401

train, backbones = load_fixture_package("crossfile/registry", "train", "backbones")


def image_loader():
    generator = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 3, 8, 8, generator=generator), torch.randint(0, 10, (4,), generator=generator)) for _ in range(2)]


def feature_loader():
    generator = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 5, 16, generator=generator), torch.randint(0, 10, (4,), generator=generator)) for _ in range(2)]


CASES = [
    (train.train_backbone, "conv", image_loader, False),
    (train.train_backbone, "patch", image_loader, False),
    (train.train_backbone, "residual", image_loader, True),
    (train.train_encoder, "features", feature_loader, False),
    (train.train_encoder, "projected", feature_loader, True),
]


@pytest.mark.parametrize(("fit", "name", "loader", "stem_trains"), CASES, ids=[c[1] for c in CASES])
def test_registered_model_stem_trains_only_with_grad_input(fit, name, loader, stem_trains, capture_warnings):
    torch.manual_seed(0)
    model = fit(name, loader())
    stem = [p for p in model.stem.parameters()]
    assert stem and all((p.grad is not None) == stem_trains for p in stem)
    assert model.head.weight.grad is not None
    assert (NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)) == (not stem_trains)
    torch.manual_seed(0)
    with no_checkpointing(backbones):
        reference = fit(name, loader())
    assert all(p.grad is not None for p in reference.stem.parameters())
