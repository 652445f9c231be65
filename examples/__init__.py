"""Agents you can run: ``agentrun worker --agent examples.helpdesk_openai:agent``."""
