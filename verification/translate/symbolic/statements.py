"""The evaluator's statements: a body's assignments, stores, branches, returns and
raises, over a symbolic state.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.verification.translate.symbolic.terms import (
    _decided,
    _definition,
    _function_definition,
    _guard_names,
    _self_field,
    _sort_of,
    all_of,
)
from replan.verification.translate.symbolic.universe import (
    _ERRORS,
    CONTENT,
    EVIDENCE,
    FIELD_KINDS,
    RECORD_TYPES,
    UNMODELLED_FIELDS,
    TranslationError,
)
from replan.verification.translate.symbolic.values import (
    _RAISING,
    SELF,
    Const,
    ContentMap,
    FMap,
    Frame,
    FSet,
    IdSet,
    Opt,
    Record,
    State,
    TraceLog,
    Tup,
    _blank_plan,
    _FieldAlias,
    _Path,
    _Raised,
    _where,
    empty_field,
)


class Statements:
    """Executes the statements a body is written in."""

    def assign_field(self, frame: Frame, node: ast.AST, name: str, value: Any) -> None:
        if name in UNMODELLED_FIELDS:
            return
        kind = FIELD_KINDS.get(name)
        if kind is None:
            raise self.fail(
                frame, node, f"assignment to {name!r}, which the abstraction does not model"
            )
        old = frame.state.get(name)
        frame.state[name] = self.coerce_field(frame, kind, value, old)

    def coerce_field(self, frame: Frame, kind: str, value: Any, old: Any) -> Any:
        u = self.u
        if kind in ("int", "mode"):
            sort = z3.IntSort() if kind == "int" else u.mode.sort
            return self.term(frame, value, sort)
        if kind == "plan?":
            blank = old.value if isinstance(old, Opt) else _blank_plan(u)
            if isinstance(value, Const) and value.value is None:
                return Opt(z3.BoolVal(False), blank)
            if isinstance(value, Record) and value.kind == "Plan":
                return Opt(z3.BoolVal(True), value)
            if isinstance(value, Opt):
                return value
        if isinstance(value, Const) and isinstance(value.value, dict | set) and not value.value:
            return empty_field(u, kind)
        if isinstance(value, FMap | FSet | IdSet | ContentMap):
            return value
        raise self.fail(frame, frame.where, f"cannot store {value!r} in a {kind} field")

    def exec_block(self, statements: list[ast.stmt], index: int, frame: Frame) -> list[_Path]:
        while index < len(statements):
            statement = statements[index]
            if isinstance(statement, ast.Return):
                value = (
                    Const(None) if statement.value is None else self.eval(statement.value, frame)
                )
                return [_Path(frame, ("return", value))]
            if isinstance(statement, ast.Raise):
                exception = statement.exc
                if exception is None:  # re-raise what the enclosing ``except`` caught
                    caught = frame.env.get(_RAISING)
                    if not isinstance(caught, str):
                        raise self.fail(frame, statement, "a bare raise outside an except")
                    return [_Path(frame, ("raise", caught))]
                target = exception.func if isinstance(exception, ast.Call) else exception
                name = target.id if isinstance(target, ast.Name) else "other"
                return [_Path(frame, ("raise", name))]
            if isinstance(statement, ast.Try):
                paths = []
                for path in self.exec_try(statement, frame):
                    if path.outcome is None:
                        paths.extend(self.exec_block(statements, index + 1, path.frame))
                    else:
                        paths.append(path)
                return paths
            if isinstance(statement, ast.If):
                test = _decided(self.eval(statement.test, frame))
                if isinstance(test, Const):
                    body = statement.body if test.value else statement.orelse
                    statements = [*body, *statements[index + 1 :]]
                    index = 0
                    continue
                condition = self.boolean(frame, test)
                paths: list[_Path] = []
                for guard, body in (
                    (condition, statement.body),
                    (z3.Not(condition), statement.orelse),
                ):
                    branch = frame.inner(
                        state=dict(frame.state),
                        env=dict(frame.env),
                        pc=(*frame.pc, guard),
                        paths=dict(frame.paths),
                    )
                    for path in self.exec_block(list(body), 0, branch):
                        if path.outcome is None:
                            paths.extend(self.exec_block(statements, index + 1, path.frame))
                        else:
                            paths.append(path)
                return paths
            self.exec_simple(statement, frame)
            index += 1
        return [_Path(frame, None)]

    def exec_try(self, statement: ast.Try, frame: Frame) -> list[_Path]:
        """``try: ... except Exception as error: ...`` (what the generated dispatch
        wraps every call in): a path that raises continues in the handler, ``error``
        naming the class it raised."""
        handlers = statement.handlers
        if statement.orelse or statement.finalbody or len(handlers) != 1:
            raise self.fail(frame, statement, "only try / one except is understood")
        handler = handlers[0]
        caught = handler.type
        if not (isinstance(caught, ast.Name) and caught.id == "Exception"):
            raise self.fail(frame, statement, "only `except Exception` is understood")
        paths = []
        for path in self.exec_block(list(statement.body), 0, frame):
            if path.outcome is None or path.outcome[0] != "raise":
                paths.append(path)
                continue
            name = path.outcome[1]
            inner = path.frame
            inner.env = {**inner.env, _RAISING: name}
            if handler.name is not None:
                member = f"raised {name if name in _ERRORS else 'other'}"
                inner.env[handler.name] = _Raised(member)
            for after in self.exec_block(list(handler.body), 0, inner):
                after.frame.env.pop(_RAISING, None)
                paths.append(after)
        return paths

    def exec_simple(self, statement: ast.stmt, frame: Frame) -> None:
        if isinstance(statement, ast.Pass):
            return
        if isinstance(statement, ast.Assert):
            # what the body takes for granted: an obligation, then assumed
            condition = self.boolean(frame, self.eval(statement.test, frame))
            self.require(frame, condition, f"`{_where(statement.test)}`")
            frame.pc = (*frame.pc, condition)
            return
        if isinstance(statement, ast.Expr):
            self._exec_expression(statement, frame)
            return
        if isinstance(statement, ast.AnnAssign) and statement.value is None:
            return  # a declaration (``result: bool``)
        if isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            self._exec_assignment(statement, frame)
            return
        raise self.fail(frame, statement, f"{type(statement).__name__} is not understood")

    def _exec_expression(self, statement: ast.Expr, frame: Frame) -> None:
        """An expression statement: a docstring, a set or trace update of a field, or a
        call made for its effect on the state."""
        value = statement.value
        if isinstance(value, ast.Constant):
            return  # a docstring
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in ("add", "discard", "append")
            and self.field_of(value.func.value, frame) is not None
            and len(value.args) == 1
        ):
            name = self.field_of(value.func.value, frame)
            assert name is not None
            if name == "_trace":
                if name in frame.state:  # the generated dispatch's trace record
                    log = frame.state[name]
                    item = self.eval(value.args[0], frame)
                    frame.state[name] = TraceLog(log.count + 1, item)
                return
            item = self.eval(value.args[0], frame)
            frame.state[name] = self.set_update(
                frame, statement, frame.state[name], item, value.func.attr == "add"
            )
            return
        if isinstance(value, ast.Call):
            self.eval(value, frame)
            return
        raise self.fail(frame, statement, "statement not understood")

    def _exec_assignment(
        self, statement: ast.Assign | ast.AnnAssign | ast.AugAssign, frame: Frame
    ) -> None:
        """An assignment to a field (``+=``/``-=`` included), a local, a tuple of
        locals, or an item of a field."""
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if len(targets) != 1 or statement.value is None:
            raise self.fail(frame, statement, "one target, one value")
        target = targets[0]
        name = _self_field(target)
        if name in UNMODELLED_FIELDS:
            return
        value = self.eval(statement.value, frame)
        if isinstance(statement, ast.AugAssign):
            if name is None or not isinstance(statement.op, ast.Add | ast.Sub):
                raise self.fail(frame, statement, "only `self.<field> += / -=` is understood")
            current = self.term(frame, frame.state[name], z3.IntSort())
            step = self.term(frame, value, z3.IntSort())
            value = current + step if isinstance(statement.op, ast.Add) else current - step
        if name is not None:
            self.assign_field(frame, statement, name, value)
        elif isinstance(target, ast.Name):
            self.bind(frame, target.id, value, statement.value)
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            self.unpack(frame, statement, target, value, statement.value)
        elif isinstance(target, ast.Subscript) and self.field_of(target.value, frame):
            field_name = self.field_of(target.value, frame)
            assert field_name is not None
            index = self.eval(target.slice, frame)
            frame.state[field_name] = self.store(
                frame, statement, frame.state[field_name], index, value
            )
        else:
            raise self.fail(frame, statement, "assignment target not understood")

    def field_of(self, node: ast.AST, frame: Frame) -> str | None:
        """The field of ``self`` that ``node`` names: ``self.<field>``, or a local
        alias of one (``contents`` after ``contents = self._contents``)."""
        name = _self_field(node)
        if name is not None:
            return name
        if isinstance(node, ast.Name):
            bound = frame.env.get(node.id)
            if isinstance(bound, _FieldAlias):
                return bound.name
        return None

    def bind(self, frame: Frame, name: str, value: Any, node: ast.expr | None) -> None:
        """A local: an alias when it names a container field of ``self`` (writes
        through it reach the field), and the argument's part it reads, if any."""
        field_name = _self_field(node) if node is not None else None
        if field_name in FIELD_KINDS and not isinstance(value, z3.ExprRef | Const):
            frame.env[name] = _FieldAlias(field_name)
        else:
            frame.env[name] = value
        path = self.path_of(node, frame) if node is not None else None
        if path is None:
            frame.paths.pop(name, None)
        else:
            frame.paths[name] = path

    def unpack(
        self, frame: Frame, node: ast.AST, target: ast.Tuple, value: Any, source: ast.expr
    ) -> None:
        """``a, b = <record or tuple>``: each name its field or item."""
        names = [e.id for e in target.elts if isinstance(e, ast.Name)]
        if isinstance(value, Record):
            fields = list(RECORD_TYPES[value.kind]._fields)  # type: ignore[attr-defined]
            items = [value.fields[f] for f in fields]
        elif isinstance(value, Tup):
            fields, items = [], list(value.items)
        else:
            raise self.fail(frame, node, "unpacking of a value the translator does not model")
        if len(items) != len(names):
            raise self.fail(frame, node, "unpacking into the wrong number of names")
        base = self.path_of(source, frame)
        for index, (name, item) in enumerate(zip(names, items, strict=True)):
            frame.env[name] = item
            if base is not None and fields:
                frame.paths[name] = ast.Attribute(base, fields[index], ast.Load())
            else:
                frame.paths.pop(name, None)

    def set_update(self, frame: Frame, node: ast.AST, container: Any, item: Any, add: bool) -> Any:
        if isinstance(container, FSet):
            members = {
                k: z3.If(self.equal(frame, item, Const(k)), z3.BoolVal(add), m)
                for k, m in container.members.items()
            }
            return FSet(container.domain, members)
        if isinstance(container, IdSet):
            return IdSet(
                z3.Store(container.array, self.term(frame, item, z3.IntSort()), z3.BoolVal(add))
            )
        raise self.fail(frame, node, "set update of a value the translator does not model")

    def store(self, frame: Frame, node: ast.AST, container: Any, index: Any, value: Any) -> Any:
        if isinstance(container, FMap):
            entries = {}
            for k, entry in container.entries.items():
                here = self.equal(frame, index, Const(k))
                stored = Opt(z3.BoolVal(True), self.term(frame, value, _sort_of(entry.value)))
                entries[k] = self.merge(here, stored, entry)
            return FMap(container.domain, entries)
        if isinstance(container, ContentMap):
            if not isinstance(value, Tup) or len(value.items) != 2 or not isinstance(index, Tup):
                raise self.fail(
                    frame, node, "_contents stores (state, source) under (key, version)"
                )
            key = self.term(frame, index.items[0], self.u.key.sort)
            version = self.term(frame, index.items[1], z3.IntSort())
            content = CONTENT.some(
                self.term(frame, value.items[0], EVIDENCE.sort),
                self.term(frame, value.items[1], z3.IntSort()),
            )
            return ContentMap(z3.Store(container.array, key, version, content))
        raise self.fail(frame, node, "store into a value the translator does not model")

    def merge_states(self, condition: z3.BoolRef, a: State, b: State) -> State:
        return {name: self.merge(condition, a[name], b[name]) for name in a}

    # -- calls -----------------------------------------------------------------------------

    def call(
        self,
        name: str,
        arguments: list[Any],
        caller: Frame,
        *,
        as_answer: bool = False,
        nodes: list[ast.expr] | None = None,
    ) -> tuple[State, Any]:
        """Run the body of ``self.<name>(*arguments)``: the state after it and its value
        (as an ``Answer`` term when ``as_answer``: a raise is an answer then)."""
        definition = _definition(self.model_class, name)
        kind = "guard" if name in _guard_names(self.u.model) else "action"
        method = getattr(self.model_class, name, None)
        return self.run_definition(
            definition,
            [SELF, *arguments],
            caller,
            state=caller.state,
            where=f"{kind} {name!r} ({self.model_class.__name__})",
            as_answer=as_answer,
            # names in a method resolve in the module that defines it, whoever calls it
            scope=getattr(method, "__globals__", None),
            nodes=None if nodes is None else [None, *nodes],
        )

    def run_function(
        self,
        function: Callable[..., Any],
        arguments: list[Any],
        caller: Frame,
        *,
        state: State,
        where: str = "",
        nodes: list[ast.expr | None] | None = None,
        as_answer: bool = False,
    ) -> tuple[State, Any]:
        """Run a plain function's body (a property, a helper of one, a member of the
        run, a generated method) with ``arguments``, names resolving in its own
        module."""
        return self.run_definition(
            _function_definition(function),
            arguments,
            caller,
            state=state,
            where=where or f"function {function.__name__!r}",
            scope=getattr(function, "__globals__", None),
            nodes=nodes,
            as_answer=as_answer,
        )

    def run_definition(
        self,
        definition: ast.FunctionDef,
        arguments: list[Any],
        caller: Frame,
        *,
        state: State,
        where: str,
        as_answer: bool = False,
        scope: Mapping[str, Any] | None = None,
        nodes: list[ast.expr | None] | None = None,
    ) -> tuple[State, Any]:
        parameters = [a.arg for a in definition.args.args]
        if len(parameters) != len(arguments):
            raise TranslationError(
                f"{caller.where}: {definition.name} takes {parameters}, got "
                f"{len(arguments)} arguments"
            )
        argument_paths: dict[str, ast.expr] = {}
        for index, parameter in enumerate(parameters):
            node = None if nodes is None else nodes[index]
            found = self.path_of(node, caller) if node is not None else None
            if found is not None:
                argument_paths[parameter] = found
        env = dict(zip(parameters, arguments, strict=True))
        if env.get("self", SELF) is SELF:
            env.pop("self", None)  # ``self`` reads the frame's state
        frame = Frame(
            dict(state),
            env,
            caller.pc,
            where,
            frozenset(parameters) | caller.parameters,
            argument_paths,
            scope if scope is not None else caller.scope,
        )
        paths = self.exec_block(list(definition.body), 0, frame)
        results: list[tuple[z3.BoolRef, State, Any]] = []
        for path in paths:
            condition = all_of(*path.frame.pc[len(caller.pc) :])
            outcome = path.outcome
            if outcome is None:
                value: Any = Const(None)
            elif outcome[0] == "return":
                value = outcome[1]
            elif as_answer:
                value = self.u.answer.members[
                    f"raised {outcome[1] if outcome[1] in _ERRORS else 'other'}"
                ]
            else:
                self.require(caller, z3.Not(condition), f"{definition.name} does not raise")
                value = Const(False)
            if as_answer:
                value = self.answer_term(caller, value)
            results.append((condition, path.frame.state, value))
        _, state, value = results[-1]
        for condition, other_state, other_value in reversed(results[:-1]):
            state = self.merge_states(condition, other_state, state)
            value = self.merge(condition, other_value, value)
        return state, value

    def answer_term(self, frame: Frame, value: Any) -> z3.ExprRef:
        if isinstance(value, Const):
            return self.u.answer_of(value.value)
        if isinstance(value, z3.BoolRef):
            return z3.If(value, self.u.answer.members["True"], self.u.answer.members["False"])
        if isinstance(value, z3.ExprRef) and value.sort() == self.u.answer.sort:
            return value
        raise self.fail(frame, frame.where, f"{value!r} is not an answer")
