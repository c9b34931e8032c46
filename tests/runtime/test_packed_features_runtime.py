"""A backbone's feature tuple handed whole to a reentrant checkpoint (CKPT003's packed form):
fixtures/packed_features.py.

Measured on torch 2.13: `cp.checkpoint(self.merge, inputs, use_reentrant=True)` with `inputs` the
tuple `Backbone.forward` returns sees no top-level tensor, so the checkpoint's output does not
require grad and every parameter of the backbone and the neck gets `.grad = None` (torch only
warns "None of the inputs have requires_grad=True"); only the head trains. Unpacked into positional
arguments (`checkpoint(fn, *inputs)`) every gradient matches the run without checkpointing.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad=True:UserWarning")


def gradients(detector_class, with_cp: bool) -> dict:
    fx = load_fixture("packed_features")
    torch.manual_seed(0)
    detector = getattr(fx, detector_class)().train()
    detector.neck.with_cp = with_cp
    torch.manual_seed(1)
    detector(torch.randn(2, 3, 16, 16)).sum().backward()
    return {name: p.grad for name, p in detector.named_parameters()}


def test_a_feature_tuple_handed_whole_leaves_the_backbone_and_neck_without_gradients():
    checkpointed, plain = gradients("Detector", True), gradients("Detector", False)
    lost = sorted(name for name, grad in checkpointed.items() if grad is None)
    assert lost and all(name.startswith(("backbone.", "neck.")) for name in lost)
    assert {name.split(".")[0] for name in lost} == {"backbone", "neck"}
    assert all(grad is not None for grad in plain.values())
    assert checkpointed["cls_head.weight"] is not None


def test_unpacked_features_are_inputs_and_every_gradient_matches():
    checkpointed, plain = gradients("UnpackedDetector", True), gradients("UnpackedDetector", False)
    assert checkpointed.keys() == plain.keys()
    for name, grad in checkpointed.items():
        assert grad is not None and torch.allclose(grad, plain[name], atol=1e-6), name
