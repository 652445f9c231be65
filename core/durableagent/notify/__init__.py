"""Telling a human (SPEC §11): notices of runs that need one, sent through Apprise (the
``notify`` extra) and deduplicated in the store. ``notices.py`` decides what to say (pure),
``targets.py`` sends it (the only module that imports apprise, and only when used),
``notifier.py`` follows the store's change feed and delivers each notice at least once."""

from __future__ import annotations

from .notices import KINDS, Notice, parse_kinds
from .targets import BadTargetError, Target, check_targets

__all__ = ["KINDS", "BadTargetError", "Notice", "Target", "check_targets", "parse_kinds"]
