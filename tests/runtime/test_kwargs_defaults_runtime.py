"""Checkpointing kwargs defaulted in a helper, and `**kwargs` forwarded to `checkpoint`, at runtime.

FINDINGS 0 and 7F: when `use_reentrant` reaches torch 2.13 neither as True nor as False, torch warns
("the use_reentrant parameter should be passed explicitly") and runs the reentrant variant.
transformers fills in its default only for None: a helper's `kwargs or {}` / `if kw is None: kw = {}`
hands it `{}`, which it passes on unchanged. The look-alikes end with `use_reentrant=False` and run
without the warning.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import (  # noqa: E402
    assert_same_grads,
    capture_warnings,  # noqa: F401
    grads,
    load_fixture,
    no_checkpointing,
    transformers_impl,  # noqa: F401
    warning_texts,
)

pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")

IMPLICIT = "use_reentrant parameter should be passed explicitly"


@pytest.mark.parametrize(
    "build, keywords",
    [("build_defaulted_kwargs", {}), ("build_defaulted_or_empty", {}), ("build_defaulted_non_reentrant", {"use_reentrant": False}), ("build_told_non_reentrant", {"use_reentrant": False})],
)
def test_helper_defaults_reach_torch_as_written(build, keywords, transformers_impl, capture_warnings):
    vfx = load_fixture("hf_vision_adapters", transformers_module=transformers_impl)
    config = vfx.TinyViTConfig()
    torch.manual_seed(0)
    model = getattr(vfx, build)(config)
    assert model.layers[0]._gradient_checkpointing_func.keywords == keywords
    vfx.training_step(model, vfx.make_batch(config))
    implicit = sum(IMPLICIT in text for text in warning_texts(capture_warnings))
    assert implicit == (config.num_layers if not keywords else 0)


def recorded_modes(fx, build):
    """Train one step and record the `use_reentrant` each checkpoint call received."""
    modes = []
    real = fx.checkpoint

    def spy(function, *args, **kwargs):
        modes.append(kwargs.get("use_reentrant", "omitted"))
        return real(function, *args, **kwargs)

    torch.manual_seed(0)
    model = build()
    fx.checkpoint = spy
    try:
        fx.training_step(model, fx.make_batch())
    finally:
        fx.checkpoint = real
    return model, modes


@pytest.mark.parametrize(
    "build, expected, calls",
    [("Encoder", "omitted", 3), ("ExplicitEncoder", False, 3), ("StoredOptionsEncoder", "omitted", 2), ("StoredExplicitOptionsEncoder", False, 2)],
)
def test_forwarded_kwargs_carry_only_what_the_callers_pass(build, expected, calls, capture_warnings):
    """Also options stored from the constructor (`ckpt_kwargs or {...}`): the default dict decides."""
    fx = load_fixture("forwarded_kwargs")
    model, modes = recorded_modes(fx, getattr(fx, build))
    assert modes == [expected] * calls
    implicit = sum(IMPLICIT in text for text in warning_texts(capture_warnings))
    assert implicit == (calls if expected == "omitted" else 0)
    # Both train like the model without checkpointing here: the finding is about the implicit mode.
    reference = getattr(fx, build)()
    reference.load_state_dict(model.state_dict())
    with no_checkpointing(fx):
        fx.training_step(reference, fx.make_batch())
    assert_same_grads(grads(model), grads(reference))
