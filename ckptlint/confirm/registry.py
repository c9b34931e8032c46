"""`@ckptlint.example(Target)`: user factories that tell `--confirm` how to run a target.

Importing this module costs nothing (no torch); the decorator only records the factory.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

Factory = TypeVar("Factory", bound=Callable[..., Any])

# (target, factory) in registration order. A target is the class or function itself, or its
# dotted name as a string ("pkg.model.Net", "pkg.model:Net") so that an examples file does not
# have to import heavy modules at the top.
EXAMPLES: list[tuple[Any, Callable[..., Any]]] = []


def example(target: Any) -> Callable[[Factory], Factory]:
    """Register a factory for `ckptlint --confirm`.

    The decorated function takes no arguments and returns `(model, args, kwargs)`:

    - for an `nn.Module` subclass target, `model(*args, **kwargs)` is one forward pass (the loss
      is derived from its output);
    - for a function target (a training step), `target(*args, **kwargs)` is one step; `model`
      is the module whose gradients, buffers and attributes are compared.

    ::

        @ckptlint.example(Net)
        def small_net():
            model = Net(channels=8)
            return model, (torch.randn(2, 3, 32, 32),), {}
    """
    if callable(target) and getattr(target, "__name__", None) == "<lambda>":
        raise TypeError("ckptlint.example() needs the class or function to run, not a lambda")

    def register(factory: Factory) -> Factory:
        EXAMPLES.append((target, factory))
        factory.__ckptlint_example__ = target  # type: ignore[attr-defined]
        return factory

    return register
