"""Contracts of our own for ``lint-imports`` (``[tool.importlinter] contract_types``).

import-linter sees modules, not names: ``from durableagent import FileStore`` is an import of
``durableagent``, which every module may import. ``forbidden_names`` reads the source of each
module instead and refuses the names listed, however they are imported (``from x import N``,
relative or not, or ``x.N`` after ``import x``).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

from importlinter import Contract, ContractCheck, fields, output


def _file_of(module: str) -> Path | None:
    """The source file of ``module``, found without importing it (nor its packages)."""
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations)))
    parts = rest.split(".") if rest else []
    package = base.joinpath(*parts, "__init__.py")
    if package.is_file():
        return package
    plain = base.joinpath(*parts[:-1], f"{parts[-1]}.py") if parts else None
    return plain if plain is not None and plain.is_file() else None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def names_used(module: str, source: str, is_package: bool) -> list[tuple[int, str]]:
    """Every ``(line, package.Name)`` the module imports or reads by its dotted name."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{anchor}.{base}" if base else anchor
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Attribute):
            name = _dotted(node)
            if name is not None:
                found.append((node.lineno, name))
    return found


class ForbiddenNamesContract(Contract):
    """The source modules (and their descendants) never use the names listed."""

    type_name = "forbidden_names"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    forbidden_names = fields.ListField(subfield=fields.StringField())

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        forbidden = {str(n) for n in self.forbidden_names}  # type: ignore[attr-defined]
        violations: list[tuple[str, int, str]] = []
        for source in self.source_modules:  # type: ignore[attr-defined]
            modules = {source.name} | set(graph.find_descendants(source.name))
            for module in sorted(modules):
                path = _file_of(module)
                if path is None:
                    continue
                is_package = path.name == "__init__.py"
                for line, name in names_used(module, path.read_text(), is_package):
                    if name in forbidden:
                        violations.append((module, line, name))
        return ContractCheck(kept=not violations, metadata={"violations": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for module, line, name in check.metadata["violations"]:
            output.print_error(f"{module} (l.{line}) uses {name}", bold=False)
            output.new_line()
