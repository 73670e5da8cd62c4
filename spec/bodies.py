"""Reading a guard, action or property body as its source says it: the one place that
turns a function into its syntax tree.

Every tool that reads a body rather than running it comes here: the generator (which
inlines the bodies into the generated controller), the check compiler (which inlines
the properties into one check per event), the z3 translator, liveness and the
diagram's reading of which policy fields a guard reads, mutation (which rewrites a
body) and adequacy (which asks what a mutant's step can run). They used to read
source each their own way; a mutant's body, registered with ``linecache`` under a
made-up file name, must read back the same everywhere, and so must a method a
subclass overrides.

``source`` is cached per function object (a body's text never changes while the
process runs); ``definition`` parses it afresh on every call, since callers rewrite
the trees they get.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any


@cache
def source(function: Callable[..., Any]) -> str | None:
    """The function's source, dedented to column 0; None when it cannot be read (a
    builtin, a function made by ``exec`` without registered source)."""
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None


def has_source(function: Callable[..., Any]) -> bool:
    """Whether ``source`` can read the function (its file and its lines)."""
    return source(function) is not None


def definition(function: Callable[..., Any]) -> ast.FunctionDef | None:
    """A fresh tree of the function's ``def``; None when its source cannot be read or
    is not a plain ``def`` (a lambda, a class)."""
    text = source(function)
    if text is None:
        return None
    try:
        node = ast.parse(text).body[0]
    except SyntaxError:
        return None
    return node if isinstance(node, ast.FunctionDef) else None


def plain_function(found: object) -> Callable[..., Any] | None:
    """The function behind a class attribute: a property's getter, a static or class
    method's function, or the function itself; None for anything else."""
    found = getattr(found, "fget", None) or getattr(found, "__func__", None) or found
    return found if inspect.isfunction(found) else None


def method(model_class: type, name: str) -> Callable[..., Any] | None:
    """``model_class``'s function named ``name`` (an override wins); None when the
    attribute is not a plain function (a property, a static method, data)."""
    found = inspect.getattr_static(model_class, name, None)
    return found if inspect.isfunction(found) else None


def method_definition(model_class: type, name: str) -> ast.FunctionDef | None:
    """A fresh tree of ``model_class``'s method ``name`` when it is a plain,
    undecorated function whose source can be read; else None."""
    function = method(model_class, name)
    if function is None:
        return None
    node = definition(function)
    if node is None or node.decorator_list:
        return None
    return node


def statements(node: ast.FunctionDef) -> list[ast.stmt]:
    """The body's statements without its docstring."""
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[1:]
    return body


def returned_expression(node: ast.FunctionDef) -> ast.expr | None:
    """The expression a body returns when, its docstring aside, it is exactly one
    ``return <expression>``; else None."""
    body = statements(node)
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    return body[0].value


def module_tree(module: ModuleType) -> tuple[str, ast.Module] | None:
    """A module's file and its whole source, parsed; None when it cannot be read."""
    try:
        path = inspect.getsourcefile(module)
        return (path, ast.parse(inspect.getsource(module))) if path else None
    except (OSError, TypeError, SyntaxError):
        return None


def class_tree(cls: type) -> tuple[str, int, ast.ClassDef] | None:
    """A class's file, the line its ``class`` statement starts on and its tree (line
    numbers relative to that statement); None when it cannot be read."""
    try:
        path = inspect.getsourcefile(cls)
        lines, first = inspect.getsourcelines(cls)
        node = ast.parse("".join(lines).expandtabs()).body[0]
    except (OSError, TypeError, SyntaxError):
        return None
    return (path, first, node) if path and isinstance(node, ast.ClassDef) else None


def location(function: Callable[..., Any]) -> tuple[str, int] | None:
    """(file, first line) of the function's ``def``; None when unknown."""
    try:
        path = inspect.getsourcefile(function)
        _, line = inspect.getsourcelines(function)
    except (OSError, TypeError):
        return None
    return (path, line) if path else None
