"""Mutants, made automatically: the shared source with one realistic bug each.

Owns the mutation operators and building the broken controllers they describe. A
mutant changes one thing the generated controller and the reference model share, so
the lockstep comparison cannot see it by construction; only the contract's
properties can (``verification/subjects/adequacy.py`` judges them):

- ``flip-comparison``: ``<``/``<=``, ``>``/``>=``, ``==``/``!=``, ``is``/``is not``,
  ``in``/``not in`` in a guard or action body;
- ``drop-operand`` / ``negate-operand``: one operand of an ``and``/``or`` in a body,
  or one conjunct of a declared guard (``cond="a and b"``); ``drop-negation``;
- ``delete-statement``: one statement of an action, the input check or ``__init__``;
- ``shift-integer``: an integer literal of a body, plus or minus one;
- ``swap-transitions``: two adjacent transitions of one state and event (priority);
- ``policy-default``: one default of the policy loader (``controller.policy.DEFAULTS``);
- ``field-initial``: one counter's initial value in the field table, plus or minus one.

A body mutant is a real subclass of ``controller.run.Run`` in a module of its own
(registered, its source readable like a file's), so the generator copies its body and
the z3 translator reads it exactly as they read the original. Messages inside
``raise`` statements are left alone: no property reads them.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
import functools
import inspect
import linecache
import sys
import textwrap
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import replan.controller.run as _run_module
from replan.controller.fields import COUNTER, FIELDS
from replan.controller.policy import DEFAULTS
from replan.controller.run import Run
from replan.spec import bodies
from replan.spec.model import MachineModel, TransitionInfo, parse_guard

OPERATORS = (
    "flip-comparison",
    "drop-operand",
    "negate-operand",
    "drop-negation",
    "delete-statement",
    "shift-integer",
    "swap-transitions",
    "policy-default",
    "field-initial",
)

_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


@dataclass(frozen=True)
class Mutant:
    """One deliberately broken controller (or policy loader)."""

    id: str  # stable: operator, place and position, e.g. "flip-comparison:plan_outdated:3.0"
    operator: str
    where: str  # the file and the body or transition it changes
    description: str  # what changed, e.g. "`a <= b` -> `a < b`"
    diff: str
    model: MachineModel
    #: replaced methods of ``Run`` and module functions of ``controller/run.py``
    #: (name -> source of the ``def``)
    methods: Mapping[str, str] = field(default_factory=dict)
    functions: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, int | bool] = field(default_factory=lambda: dict(DEFAULTS))

    @property
    def bodies(self) -> tuple[str, ...]:
        """The bodies of ``Run`` it changes (empty for a declaration or policy mutant)."""
        return tuple(self.methods)

    @functools.cached_property
    def model_class(self) -> type[Run]:
        """The run class whose bodies the generator copies and z3 reads: ``Run``, or
        a subclass with the mutated bodies (built on first use)."""
        if not self.methods and not self.functions:
            return Run
        return build_body_mutant(Run, self.methods, self.functions)

    @property
    def changes_policy(self) -> bool:
        return self.operator == "policy-default"


# ---- which bodies there are ----------------------------------------------------------


def body_names(model: MachineModel, model_class: type = Run) -> list[str]:
    """The methods of the run the declaration names (guards, actions, checks, stopped
    answers), in a fixed order. (``__init__`` sets the field table's values: those are
    the ``field-initial`` operator's.)"""
    names: dict[str, None] = {}
    for transition in model.transitions:
        for name in transition.guard_names:
            names[name] = None
        names[transition.action] = None
    for interface in model.interface.values():
        if interface.check is not None:
            names[interface.check] = None
        names[interface.when_stopped] = None
    return [n for n in names if callable(getattr(model_class, n, None))]


def _guards(model: MachineModel) -> set[str]:
    return {name for t in model.transitions for name in t.guard_names}


def _module_functions(tree: ast.AST, module: types.ModuleType) -> set[str]:
    """Module functions a body calls outside a ``raise`` (whose bodies decide)."""
    found = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Raise):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            target = getattr(module, node.func.id, None)
            if inspect.isfunction(target) and target.__module__ == module.__name__:
                found.add(node.func.id)
        stack.extend(ast.iter_child_nodes(node))
    return found


# ---- mutation sites in one function -----------------------------------------------------


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node outside ``raise`` statements and docstrings, in a fixed order."""
    stack = [tree]
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.Raise | ast.JoinedStr):
            continue
        yield node
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.FunctionDef):
            children = [c for c in children if c not in node.args.defaults]
        stack.extend(children)


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


@dataclass(frozen=True)
class _Site:
    operator: str
    node: int  # position in ``_walk`` order
    detail: int  # which operand / operator / +1 or -1


def _sites(definition: ast.FunctionDef, statements: bool) -> list[_Site]:
    sites = []
    for position, node in enumerate(_walk(definition)):
        if isinstance(node, ast.Compare):
            sites += [
                _Site("flip-comparison", position, i)
                for i, op in enumerate(node.ops)
                if type(op) in _FLIP
            ]
        elif isinstance(node, ast.BoolOp):
            for i in range(len(node.values)):
                sites += [_Site("drop-operand", position, i), _Site("negate-operand", position, i)]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            sites.append(_Site("drop-negation", position, 0))
        elif (
            isinstance(node, ast.Constant)
            and type(node.value) is int
            and not isinstance(node.value, bool)
        ):
            sites += [_Site("shift-integer", position, 1), _Site("shift-integer", position, -1)]
        if statements and isinstance(node, ast.FunctionDef | ast.If):
            blocks = [node.body] + ([node.orelse] if isinstance(node, ast.If) else [])
            for block_index, block in enumerate(blocks):
                for i, statement in enumerate(block):
                    if not _is_docstring(statement):
                        sites.append(_Site("delete-statement", position, block_index * 1000 + i))
    return sites


def _apply(definition: ast.FunctionDef, site: _Site) -> tuple[ast.FunctionDef, str] | None:
    """The function with ``site`` mutated, and what changed (None: no real change)."""
    mutated = copy.deepcopy(definition)
    node = next(n for i, n in enumerate(_walk(mutated)) if i == site.node)
    before = ast.unparse(node)
    after: ast.AST = node
    if site.operator == "flip-comparison":
        assert isinstance(node, ast.Compare)
        node.ops[site.detail] = _FLIP[type(node.ops[site.detail])]()
    elif site.operator == "drop-operand":
        assert isinstance(node, ast.BoolOp)
        del node.values[site.detail]
        if len(node.values) == 1:
            after = node.values[0]
            _replace(mutated, node, after)
    elif site.operator == "negate-operand":
        assert isinstance(node, ast.BoolOp)
        node.values[site.detail] = ast.UnaryOp(ast.Not(), node.values[site.detail])
    elif site.operator == "drop-negation":
        assert isinstance(node, ast.UnaryOp)
        after = node.operand
        _replace(mutated, node, after)
    elif site.operator == "shift-integer":
        assert isinstance(node, ast.Constant)
        node.value = node.value + site.detail
    elif site.operator == "delete-statement":
        assert isinstance(node, ast.FunctionDef | ast.If)
        block = node.body if site.detail < 1000 else node.orelse  # type: ignore[union-attr]
        index = site.detail % 1000
        deleted = ast.unparse(block[index]).splitlines()[0]
        del block[index]
        if not [s for s in block if not _is_docstring(s)]:
            block.append(ast.Pass())
        ast.fix_missing_locations(mutated)
        return mutated, f"deleted `{deleted}`"
    ast.fix_missing_locations(mutated)
    text = ast.unparse(after)
    if text == before:
        return None
    return mutated, f"`{before}` -> `{text}`"


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return


# ---- building a body mutant ---------------------------------------------------------------

_COUNTER = [0]


def _source_of(function: Callable[..., Any]) -> str:
    """A body's source (``spec.bodies``): every body a mutant rewrites can be read."""
    text = bodies.source(function)
    if text is None:
        raise ValueError(f"{function.__qualname__}: its source cannot be read")
    return text


def build_body_mutant(
    model_class: type[Run],
    methods: Mapping[str, str],
    functions: Mapping[str, str],
) -> type[Run]:
    """A ``Run`` subclass in a module of its own whose ``methods`` (name -> source of
    the def, at column 0) and module ``functions`` replace the originals; every other
    global is ``controller.run``'s. Its source is registered so ``inspect`` reads it
    back, which is what the generator and the translator do."""
    _COUNTER[0] += 1
    number = _COUNTER[0]
    name = f"replan_mutant_{number}"
    class_name = f"Mutant{number}"
    parts = [*functions.values()]
    body = "\n".join(textwrap.indent(source, "    ") for source in methods.values())
    parts.append(f"class {class_name}(Base):\n    __slots__ = ()\n\n{body}\n")
    text = "\n\n".join(parts)
    filename = f"<{name}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__dict__.update({k: v for k, v in vars(_run_module).items() if not k.startswith("__")})
    module.__dict__.update({"__name__": name, "__file__": filename, "Base": model_class})
    sys.modules[name] = module
    exec(compile(text, filename, "exec"), module.__dict__)
    built = module.__dict__[class_name]
    assert isinstance(built, type) and issubclass(built, Run)
    return built


def _diff(path: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=1
        )
    ).rstrip()


def body_mutants(model: MachineModel, model_class: type[Run] = Run) -> Iterator[Mutant]:
    """Every body mutant: each site of each body the declaration names, and of each
    module function of ``controller/run.py`` those bodies call."""
    guards = _guards(model)
    module = _run_module
    bodies = body_names(model, model_class)
    function_names: dict[str, None] = {}
    for name in bodies:
        tree = ast.parse(_source_of(getattr(model_class, name)))
        for found in sorted(_module_functions(tree, module)):
            function_names[found] = None
    for name in bodies:
        source = _source_of(getattr(model_class, name))
        yield from _function_mutants(
            model, name, source, name not in guards, f"controller/run.py: Run.{name}"
        )
    for name in function_names:
        callers = {
            b: _source_of(getattr(model_class, b))
            for b in bodies
            if name in _module_functions(ast.parse(_source_of(getattr(model_class, b))), module)
        }
        yield from _function_mutants(
            model,
            name,
            _source_of(getattr(module, name)),
            False,
            f"controller/run.py: {name}",
            callers=callers,
        )


def _function_mutants(
    model: MachineModel,
    name: str,
    source: str,
    statements: bool,
    where: str,
    callers: dict[str, str] | None = None,
) -> Iterator[Mutant]:
    """Every mutant of one function's source: a method of ``Run`` (``callers`` None),
    or a module function, replaced together with the ``callers`` copied beside it so
    that they resolve to the mutated one."""
    definition = ast.parse(source).body[0]
    assert isinstance(definition, ast.FunctionDef)
    for site in _sites(definition, statements):
        applied = _apply(definition, site)
        if applied is None:
            continue
        mutated, description = applied
        new_source = ast.unparse(mutated) + "\n"
        if callers is None:
            methods, functions = {name: new_source}, {}
        else:
            methods, functions = callers, {name: new_source}
        yield Mutant(
            id=f"{site.operator}:{name}:{site.node}.{site.detail}",
            operator=site.operator,
            where=where,
            description=description,
            diff=_diff("controller/run.py", ast.unparse(definition) + "\n", new_source),
            model=model,
            methods=methods,
            functions=functions,
        )


# ---- declaration mutants ------------------------------------------------------------------


def renumbered(model: MachineModel, transitions: list[TransitionInfo]) -> MachineModel:
    """``model`` with ``transitions``, indices and priorities as the extractor gives."""
    result = []
    ranks: dict[tuple[str, str], int] = {}
    for index, transition in enumerate(transitions):
        rank = ranks.get((transition.source, transition.event), 0) + 1
        ranks[(transition.source, transition.event)] = rank
        result.append(dataclasses.replace(transition, index=index, priority=rank))
    return dataclasses.replace(model, transitions=tuple(result))


def _guard_variants(cond: str) -> Iterator[tuple[str, str, str]]:
    """(operator, new guard, description) for each conjunct of a declared guard."""
    tree = parse_guard(cond)
    parts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    for i, part in enumerate(parts):
        text = ast.unparse(part)
        rest = [ast.unparse(p) for j, p in enumerate(parts) if j != i]
        yield "drop-operand", " and ".join(rest), f"guard `{cond}`: dropped `{text}`"
        negated = (
            ast.unparse(part.operand)
            if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not)
            else f"not ({text})"
            if isinstance(part, ast.BoolOp)
            else f"not {text}"
        )
        others = [ast.unparse(p) for p in parts]
        others[i] = negated
        yield "negate-operand", " and ".join(others), f"guard `{cond}`: `{text}` -> `{negated}`"


def declaration_mutants(model: MachineModel) -> Iterator[Mutant]:
    transitions = list(model.transitions)
    for transition in transitions:
        if not transition.cond:
            continue
        for operator, cond, description in _guard_variants(transition.cond):
            changed = [
                dataclasses.replace(t, cond=cond) if t.index == transition.index else t
                for t in transitions
            ]
            yield Mutant(
                id=f"{operator}:transition-{transition.index}:{cond or 'always'}",
                operator=operator,
                where=f"spec/declaration.py: {transition.label}",
                description=description,
                diff=_diff(
                    "spec/declaration.py",
                    f'cond="{transition.cond}"\n',
                    f'cond="{cond}"\n' if cond else "(no cond)\n",
                ),
                model=renumbered(model, changed),
            )
    for position in range(len(transitions) - 1):
        first, second = transitions[position], transitions[position + 1]
        if (first.source, first.event) != (second.source, second.event):
            continue
        swapped = [*transitions]
        swapped[position], swapped[position + 1] = second, first
        yield Mutant(
            id=f"swap-transitions:{first.index}-{second.index}",
            operator="swap-transitions",
            where=f"spec/declaration.py: {first.source} --{first.event}-->",
            description=f"`{first.label}` (priority {first.priority}) and `{second.label}` swapped",
            diff=_diff(
                "spec/declaration.py",
                f"{first.label}\n{second.label}\n",
                f"{second.label}\n{first.label}\n",
            ),
            model=renumbered(model, swapped),
        )


def policy_mutants(model: MachineModel) -> Iterator[Mutant]:
    for name, value in DEFAULTS.items():
        changes = [not value] if isinstance(value, bool) else [value + 1, value - 1]
        for changed in changes:
            defaults = {**DEFAULTS, name: changed}
            yield Mutant(
                id=f"policy-default:{name}={changed}",
                operator="policy-default",
                where="controller/policy.py: DEFAULTS",
                description=f"default {name} {value!r} -> {changed!r}",
                diff=_diff(
                    "controller/policy.py",
                    f'"{name}": {value!r},\n',
                    f'"{name}": {changed!r},\n',
                ),
                model=model,
                defaults=defaults,
            )


def field_mutants(model: MachineModel) -> Iterator[Mutant]:
    """A run that starts with one counter off by one (``controller/fields.py``)."""
    for declared in FIELDS:
        if declared.kind is not COUNTER:
            continue
        for changed in (declared.initial + 1, declared.initial - 1):
            source = (
                "def __init__(self, policy=None):\n"
                "    self.policy = DEFAULT_POLICY if policy is None else policy\n"
                "    for field in FIELDS:\n"
                "        setattr(self, field.attribute, field.fresh())\n"
                f"    self.{declared.attribute} = {changed!r}\n"
            )
            yield Mutant(
                id=f"field-initial:{declared.attribute}={changed}",
                operator="field-initial",
                where="controller/fields.py: FIELDS",
                description=f"{declared.attribute} starts at {changed!r}, not {declared.initial!r}",
                diff=_diff(
                    "controller/fields.py",
                    f'Field("{declared.attribute}", COUNTER, {declared.initial!r}, ...)\n',
                    f'Field("{declared.attribute}", COUNTER, {changed!r}, ...)\n',
                ),
                model=model,
                methods={"__init__": source},
            )


def all_mutants(model: MachineModel, model_class: type[Run] = Run) -> list[Mutant]:
    """Every mutant of the declaration, the bodies and the policy defaults, with
    unique ids, in a fixed order."""
    found: dict[str, Mutant] = {}
    for mutant in (
        *declaration_mutants(model),
        *body_mutants(model, model_class),
        *policy_mutants(model),
        *field_mutants(model),
    ):
        found.setdefault(mutant.id, mutant)
    return list(found.values())
