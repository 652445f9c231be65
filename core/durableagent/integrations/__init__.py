"""Agents written against a framework, made durable under the journal (docs/integrations.md).

Each integration is a module of its own behind its extra, imported only where used:
``durableagent.integrations.pydantic_ai`` (extra ``pydantic-ai``) and
``durableagent.integrations.openai_agents`` (extra ``openai-agents``). ``import durableagent``
imports none of them."""
