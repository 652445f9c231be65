"""Modal dialogs, one per file; each returns its value through ``dismiss``."""

from __future__ import annotations

from .approve import ApproveDialog
from .base import Act, ActingDialog, login_name
from .confirm import ConfirmDialog
from .fork import ForkDialog
from .help import HelpScreen
from .plan import PlanScreen
from .reconcile import ReconcileDialog
from .retry import RetryDialog

__all__ = [
    "Act",
    "ActingDialog",
    "ApproveDialog",
    "ConfirmDialog",
    "ForkDialog",
    "HelpScreen",
    "PlanScreen",
    "ReconcileDialog",
    "RetryDialog",
    "login_name",
]
