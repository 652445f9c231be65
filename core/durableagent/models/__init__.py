"""Models: the ``Model`` seam and ``ScriptedModel`` (``base.py``), and adapters over the
providers' official SDKs (extras ``openai`` and ``anthropic``).

``from durableagent.models import OpenAIModel`` loads the ``openai`` SDK only then; importing
this package loads neither SDK. Each adapter is a :class:`durableagent.Model`: the SDK's own
retries are off (a failed call is a read step that re-runs on the next attempt, when the
worker's backoff, honouring ``Retry-After``, says so), and each reply carries its token usage,
model and response id into the journal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Model, ScriptedModel

if TYPE_CHECKING:
    from .anthropic import AnthropicModel
    from .openai import OpenAIModel

__all__ = ["AnthropicModel", "Model", "OpenAIModel", "ScriptedModel"]


def __getattr__(name: str) -> object:
    # Each adapter imports its SDK (hundreds of milliseconds): only when asked for.
    if name == "OpenAIModel":
        from .openai import OpenAIModel

        return OpenAIModel
    if name == "AnthropicModel":
        from .anthropic import AnthropicModel

        return AnthropicModel
    raise AttributeError(f"module 'durableagent.models' has no attribute {name!r}")
