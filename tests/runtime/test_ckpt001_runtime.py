"""CKPT001 at runtime: reentrant checkpoints fed only tensors that cannot require grad.

FINDINGS 1A/1B/1F: the parameters inside get `.grad = None` (silently, with one UserWarning per
call), and the no-grad chain cascades into the next checkpointed block. Non-reentrant mode, a
trainable stem first, or `x.requires_grad_()` give gradients identical to an un-checkpointed run.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import (  # noqa: E402
    NO_INPUT_GRAD_WARNING,
    assert_same_grads,
    capture_warnings,  # noqa: F401
    grads,
    load_fixture,
    no_checkpointing,
    none_only_in,
    warning_texts,
)

fx = load_fixture("raw_input_checkpoint")


def run_cifar(model_class, lr=0.0, steps=1):
    """Train a copy without checkpointing and the model itself, from the same weights, data and dropout seed."""
    torch.manual_seed(0)
    model = model_class()
    model_ref = copy.deepcopy(model)
    loader = [fx.make_cifar_batch(seed=s) for s in range(steps)]
    with no_checkpointing(fx):
        torch.manual_seed(1)
        loss_ref = fx.fit_cifar(model_ref, loader, lr=lr)
    torch.manual_seed(1)
    loss = fx.fit_cifar(model, loader, lr=lr)
    return model, model_ref, loss, loss_ref


def test_seed_cifar_model_both_blocks_get_no_gradients(capture_warnings):
    model, model_ref, loss, loss_ref = run_cifar(fx.CIFAR10Model)
    got, ref = grads(model), grads(model_ref)
    block_params = sorted(name for name in ref if name.startswith(("cnn_block_1.", "cnn_block_2.")))
    assert len(block_params) == 8
    assert none_only_in(got, ref) == block_params  # cnn_block_2 too: its input is cnn_block_1's no-grad output
    # Only the un-checkpointed tail trains, exactly as without checkpointing.
    for name in ("linearize.0.weight", "linearize.0.bias", "out.weight", "out.bias"):
        torch.testing.assert_close(got[name], ref[name], rtol=1e-5, atol=1e-7)
    # FINDINGS 1A: nothing looks wrong from outside, the loss is the same and still requires grad.
    assert torch.equal(loss, loss_ref) and loss.requires_grad
    texts = warning_texts(capture_warnings)
    assert texts.count(NO_INPUT_GRAD_WARNING) == 2
    assert sum("use_reentrant parameter should be passed explicitly" in t for t in texts) == 2


def test_seed_cifar_model_conv_blocks_never_move(capture_warnings):
    model, model_ref, _, _ = run_cifar(fx.CIFAR10Model, lr=0.1, steps=2)
    torch.manual_seed(0)
    initial = fx.CIFAR10Model()
    for block in ("cnn_block_1", "cnn_block_2"):
        for key, value in getattr(model, block).state_dict().items():
            assert torch.equal(value, getattr(initial, block).state_dict()[key]), (block, key)
            assert not torch.equal(getattr(model_ref, block).state_dict()[key], value), (block, key)
    assert not torch.equal(model.out.weight, initial.out.weight)


@pytest.mark.parametrize("model_class", ["CIFAR10ModelNonReentrant", "CIFAR10ModelSecondBlockOnly", "CIFAR10ModelInputGrad"])
def test_cifar_look_alikes_train_every_block(model_class, capture_warnings):
    model, model_ref, loss, loss_ref = run_cifar(getattr(fx, model_class))
    assert_same_grads(grads(model), grads(model_ref))
    assert torch.equal(loss, loss_ref)
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)


def run_features(build):
    torch.manual_seed(0)
    model = build()
    model_ref = copy.deepcopy(model)
    batch = fx.make_feature_batch()
    with no_checkpointing(fx):
        fx.fit_features(model_ref, [batch], lr=0.0)
    fx.fit_features(model, [batch], lr=0.0)
    return grads(model), grads(model_ref)


def test_loop_over_normalized_input_freezes_every_block(capture_warnings):
    got, ref = run_features(fx.NormalizedStack)
    assert none_only_in(got, ref) == sorted(name for name in ref if name.startswith("blocks."))
    assert got["head.weight"] is not None
    # One warning per block call: the chain cascades through the loop.
    assert warning_texts(capture_warnings).count(NO_INPUT_GRAD_WARNING) == 3


def test_loop_after_trainable_stem_is_correct(capture_warnings):
    got, ref = run_features(fx.StemmedStack)
    assert_same_grads(got, ref)
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)


def test_checkpoint_sequential_on_raw_input_freezes_checkpointed_segment(capture_warnings):
    got, ref = run_features(fx.SequentialEncoder)
    # segments=2 over 8 modules: the first segment (features.0-3) is checkpointed, the last runs plain.
    assert none_only_in(got, ref) == ["features.0.bias", "features.0.weight", "features.2.bias", "features.2.weight"]
    assert_same_grads({k: v for k, v in got.items() if not k.startswith(("features.0", "features.2"))},
                      {k: v for k, v in ref.items() if not k.startswith(("features.0", "features.2"))})


def test_checkpoint_sequential_non_reentrant_is_correct(capture_warnings):
    got, ref = run_features(fx.SequentialEncoderNonReentrant)
    assert_same_grads(got, ref)


@pytest.mark.parametrize("model_class, frozen", [("LatentGenerator", True), ("LatentGeneratorNoiseGrad", False)])
def test_checkpoint_on_sampled_noise(model_class, frozen, capture_warnings):
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    model_ref = copy.deepcopy(model)
    with no_checkpointing(fx):
        torch.manual_seed(5)
        model_ref(4).pow(2).mean().backward()
    torch.manual_seed(5)
    model(4).pow(2).mean().backward()
    got, ref = grads(model), grads(model_ref)
    if frozen:
        assert none_only_in(got, ref) == sorted(name for name in ref if name.startswith("mapping."))
        torch.testing.assert_close(got["synthesis.weight"], ref["synthesis.weight"], rtol=1e-5, atol=1e-7)
    else:
        assert_same_grads(got, ref)


@pytest.mark.parametrize("fit, frozen", [("fit_linear_probe", True), ("fit_linear_probe_fixed", False)])
def test_encoder_checkpointed_on_loader_batch(fit, frozen, capture_warnings):
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(2))
    head = torch.nn.Linear(16, 10)
    encoder_ref, head_ref = copy.deepcopy(encoder), copy.deepcopy(head)
    loader = [fx.make_cifar_batch(image_size=8, seed=s) for s in range(2)]
    with no_checkpointing(fx):
        getattr(fx, fit)(encoder_ref, head_ref, loader, lr=0.1)
    getattr(fx, fit)(encoder, head, loader, lr=0.1)
    if frozen:
        assert none_only_in(grads(encoder), grads(encoder_ref)) == ["0.bias", "0.weight"]
        # The optimizer skips parameters without .grad: the encoder never moved, the reference did.
        torch.manual_seed(0)
        initial = torch.nn.Conv2d(3, 4, 3, padding=1).weight
        assert torch.equal(encoder[0].weight, initial)
        assert not torch.equal(encoder_ref[0].weight, initial)
    else:
        assert_same_grads(grads(encoder), grads(encoder_ref))
        assert_same_grads(grads(head), grads(head_ref))
