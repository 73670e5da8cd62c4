"""The evaluator's expressions: a Python expression of a body as a symbolic value."""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.spec import bodies
from replan.verification.translate.symbolic.helpers import HELPERS
from replan.verification.translate.symbolic.terms import (
    _BINOPS,
    _OPS,
    _class_text,
    _decided,
    _guard_names,
    _is_body_of_class,
    _subset,
    all_of,
    any_of,
)
from replan.verification.translate.symbolic.universe import CONTENT
from replan.verification.translate.symbolic.values import (
    POLICY,
    SELF,
    Choice,
    Const,
    ContentMap,
    FMap,
    Frame,
    FSet,
    IdSet,
    Opt,
    Record,
    StateRef,
    TraceLog,
    Tup,
    _Bound,
    _FieldAlias,
    _InParameterNames,
    _Method,
    _Raised,
    _RunMethod,
    _TypeOf,
    _where,
)


class Expressions:
    """Evaluates the expressions a body is written in."""

    def eval(self, node: ast.expr, frame: Frame) -> Any:
        method = getattr(self, f"_eval_{type(node).__name__}", None)
        if method is None:
            raise self.fail(frame, node, f"{type(node).__name__} is not understood")
        return method(node, frame)

    def _eval_Constant(self, node: ast.Constant, frame: Frame) -> Any:
        return Const(node.value)

    def _eval_Name(self, node: ast.Name, frame: Frame) -> Any:
        if node.id in frame.env:
            value = frame.env[node.id]
            return frame.state[value.name] if isinstance(value, _FieldAlias) else value
        if node.id == "self":
            return SELF
        scope = self.globals if frame.scope is None else frame.scope
        if node.id in scope:
            return Const(scope[node.id])
        if hasattr(builtins, node.id):
            return Const(getattr(builtins, node.id))
        raise self.fail(frame, node, "unknown name")

    def _eval_Dict(self, node: ast.Dict, frame: Frame) -> Any:
        if node.keys:
            raise self.fail(frame, node, "only an empty dict is understood")
        return Const({})

    def _eval_List(self, node: ast.List, frame: Frame) -> Any:
        if node.elts:
            raise self.fail(frame, node, "only an empty list is understood")
        return Const([])

    def _eval_Tuple(self, node: ast.Tuple, frame: Frame) -> Any:
        items = tuple(self.eval(e, frame) for e in node.elts)
        if all(isinstance(i, Const) for i in items):
            return Const(tuple(i.value for i in items))
        return Tup(items)

    def _eval_Attribute(self, node: ast.Attribute, frame: Frame) -> Any:
        base = self.eval(node.value, frame)
        name = node.attr
        if base is SELF or isinstance(base, StateRef):
            fields = frame.state if base is SELF else base.state
            if name in fields:
                return fields[name]
            if name == "policy":
                return POLICY
            member = getattr(self.model_class, name, None)
            if isinstance(member, property) and member.fget is not None:
                # a read-only member (``run.steps``): its getter's body, on that run
                _, value = self.run_function(
                    member.fget, [base], frame, state=fields, where=f"member {name!r}"
                )
                return value
            if callable(member):
                return _Method(name) if base is SELF else _RunMethod(base, name)
            raise self.fail(frame, node, "not a modelled field of the run")
        if base is POLICY:
            if name in self.u.limits:
                return self.u.limits[name]
            if not hasattr(self.u.policy, name):
                raise self.fail(frame, node, "not a field of the policy")
            return Const(getattr(self.u.policy, name))
        if isinstance(base, Opt):
            self.require(frame, base.some, f"`{_where(node.value)}` is not None")
            base = base.value
        if isinstance(base, Record):
            if name not in base.fields:
                raise self.fail(frame, node, f"{base.kind} has no field {name!r}")
            path = self.path_of(node.value, frame)
            if path is not None:
                # a field of the event's argument exists only if it is that record:
                # Python raises AttributeError otherwise, so the body must know
                text = ast.unparse(path)
                self.require(
                    frame, self._atom(f"type({text}) is {base.kind}"), f"`{text}` is a {base.kind}"
                )
            return base.fields[name]
        if isinstance(base, Choice):
            return Choice(tuple((c, Const(getattr(v.value, name))) for c, v in base.options))
        if isinstance(base, Const):
            if isinstance(base.value, type) and issubclass(base.value, Enum):
                return Const(getattr(base.value, name))
            return _Bound(base, name)
        if isinstance(base, FMap | FSet | IdSet | ContentMap):
            return _Bound(base, name)
        raise self.fail(frame, node, "attribute of a value the translator does not model")

    def _eval_Compare(self, node: ast.Compare, frame: Frame) -> Any:
        left = self.eval(node.left, frame)
        results: list[z3.BoolRef] = []
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comparator, frame)
            results.append(self._compare(frame, node, op, left, right))
            left = right
        return results[0] if len(results) == 1 else all_of(*results)

    def _compare(self, frame: Frame, node: ast.AST, op: ast.cmpop, a: Any, b: Any) -> z3.BoolRef:
        if isinstance(a, _TypeOf) and isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq):
            if not isinstance(b, Const) or not isinstance(b.value, type):
                raise self.fail(frame, node, "type() compared with something other than a class")
            atom = self._atom(f"type({a.path}) is {_class_text(b.value)}")
            return atom if isinstance(op, ast.Is | ast.Eq) else z3.Not(atom)
        if isinstance(op, ast.LtE) and isinstance(a, IdSet) and isinstance(b, IdSet):
            return _subset(a.array, b.array)
        if isinstance(op, ast.Eq | ast.Is):
            return self.equal(frame, a, b)
        if isinstance(op, ast.NotEq | ast.IsNot):
            return z3.Not(self.equal(frame, a, b))
        if isinstance(op, ast.In):
            return self.contains(frame, b, a)
        if isinstance(op, ast.NotIn):
            return z3.Not(self.contains(frame, b, a))
        if isinstance(a, Const) and isinstance(b, Const):
            return z3.BoolVal(bool(eval(f"a {_OPS[type(op)]} b", {"a": a.value, "b": b.value})))
        left = self.term(frame, a, z3.IntSort())
        right = self.term(frame, b, z3.IntSort())
        if isinstance(op, ast.Lt):
            return left < right
        if isinstance(op, ast.LtE):
            return left <= right
        if isinstance(op, ast.Gt):
            return left > right
        if isinstance(op, ast.GtE):
            return left >= right
        raise self.fail(frame, node, "comparison not understood")

    def _eval_BoolOp(self, node: ast.BoolOp, frame: Frame) -> Any:
        is_and = isinstance(node.op, ast.And)
        values: list[z3.BoolRef] = []
        pc = frame.pc
        for operand in node.values:
            inner = frame.inner(pc=pc)
            value = self.boolean(frame, self.eval(operand, inner))
            frame.state = inner.state
            # Python stops at the first operand that decides: so does the translation
            # (a later operand may not even apply, ``event == "observe" and obs.key``)
            if z3.is_false(value) if is_and else z3.is_true(value):
                return Const(not is_and)
            values.append(value)
            pc = (*pc, value if is_and else z3.Not(value))
        return all_of(*values) if is_and else any_of(*values)

    def _eval_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Any:
        operand = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            if isinstance(operand, Const):
                return Const(not operand.value)
            return z3.Not(self.boolean(frame, operand))
        if isinstance(node.op, ast.USub):
            if isinstance(operand, Const):
                return Const(-operand.value)
            return -self.term(frame, operand, z3.IntSort())
        raise self.fail(frame, node, "operator not understood")

    def _eval_BinOp(self, node: ast.BinOp, frame: Frame) -> Any:
        left = self.eval(node.left, frame)
        right = self.eval(node.right, frame)
        if isinstance(left, Const) and isinstance(right, Const):
            return Const(eval(f"a {_BINOPS[type(node.op)]} b", {"a": left.value, "b": right.value}))
        a = self.term(frame, left, z3.IntSort())
        b = self.term(frame, right, z3.IntSort())
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        raise self.fail(frame, node, "arithmetic other than + and - is not understood")

    def _eval_IfExp(self, node: ast.IfExp, frame: Frame) -> Any:
        decided = _decided(self.eval(node.test, frame))
        if isinstance(decided, Const):
            return self.eval(node.body if decided.value else node.orelse, frame)
        test = self.boolean(frame, decided)
        branches = []
        for condition, body in ((test, node.body), (z3.Not(test), node.orelse)):
            inner = frame.inner(state=dict(frame.state), pc=(*frame.pc, condition))
            branches.append((self.eval(body, inner), inner.state))
        frame.state = self.merge_states(test, branches[0][1], branches[1][1])
        return self.merge(test, branches[0][0], branches[1][0])

    def _eval_Subscript(self, node: ast.Subscript, frame: Frame) -> Any:
        container = self.eval(node.value, frame)
        index = self.eval(node.slice, frame)
        return self._subscript(node, frame, container, index)

    def _subscript(self, node: ast.Subscript, frame: Frame, container: Any, index: Any) -> Any:
        if isinstance(container, Choice):  # one of the policy's mappings, by a symbolic key
            return _flattened(
                tuple(
                    (condition, self._subscript(node, frame, option, index))
                    for condition, option in container.options
                )
            )
        if isinstance(index, Const) and isinstance(index.value, int):
            if isinstance(container, Const) and isinstance(container.value, tuple):
                return Const(container.value[index.value])  # the policy's own data
            if isinstance(container, Tup):
                return container.items[index.value]
            if isinstance(container, TraceLog):
                if index.value not in (0, -1):
                    raise self.fail(frame, node, "only the one record a call appends is modelled")
                return container.last
        if isinstance(container, Const) and isinstance(container.value, Mapping):
            mapping = container.value
            if isinstance(index, Const):
                if index.value not in mapping:
                    raise self.fail(frame, node, f"{index.value!r} is not a key")
                return Const(mapping[index.value])
            options = tuple(
                (self.equal(frame, index, Const(k)), Const(v)) for k, v in mapping.items()
            )
            options = tuple(o for o in options if not z3.is_false(z3.simplify(o[0])))
            self.require(
                frame,
                any_of(*(c for c, _ in options)),
                f"`{_where(node.slice)}` is a key of `{_where(node.value)}`",
            )
            if not options:
                raise self.fail(frame, node, "no key can match")
            return Choice(options)
        if isinstance(container, FMap):
            entry = self.map_get(frame, container, index, None)
            self.require(
                frame, entry.some, f"`{_where(node.slice)}` is a key of `{_where(node.value)}`"
            )
            return entry.value
        raise self.fail(frame, node, "subscript of a value the translator does not model")

    def _eval_Call(self, node: ast.Call, frame: Frame) -> Any:
        """A call: its value, and its effect on the frame's state.

        Long: one dispatch on what is called (a method of the run, a body, a builtin, a
        helper, an opaque or plain function); each branch is a few lines and the
        order of the tests is the translation's precedence."""
        if node.keywords:
            raise self.fail(frame, node, "keyword arguments are not understood")
        function = self.eval(node.func, frame)
        if isinstance(function, _Method):
            arguments = [self.eval(a, frame) for a in node.args]
            state, value = self.call(function.name, arguments, frame, nodes=node.args)
            frame.state = state
            return value
        if isinstance(function, _RunMethod):
            arguments = [self.eval(a, frame) for a in node.args]
            method = getattr(self.model_class, function.name)
            _, value = self.run_function(
                method,
                [function.run, *arguments],
                frame,
                state=function.run.state,
                where=f"method {function.name!r}",
                nodes=[None, *node.args],
            )
            return value
        if isinstance(function, _Bound) and _is_body_of_class(function):
            # ``Run.name(self, ...)``: the generated code calls a body it does not copy
            # through the bodies' class (a run does not offer its bodies)
            arguments = [self.eval(a, frame) for a in node.args]
            kind = "guard" if function.name in _guard_names(self.u.model) else "action"
            owner = function.receiver.value
            state, value = self.run_function(
                getattr(owner, function.name),
                arguments,
                frame,
                state=frame.state,
                where=f"{kind} {function.name!r} ({owner.__name__})",
                nodes=node.args,
            )
            frame.state = state
            return value
        if isinstance(function, _Bound):
            arguments = [self.eval(a, frame) for a in node.args]
            return self._call_bound(frame, node, function, arguments)
        if not isinstance(function, Const):
            raise self.fail(frame, node, "call not understood")
        target = function.value
        if target in (any, all):
            return self._quantifier(frame, node, target is any)
        if target in (set, dict) and not node.args:
            return Const(target())
        if target is type and len(node.args) == 1:
            caught = self.eval(node.args[0], frame) if isinstance(node.args[0], ast.Name) else None
            if isinstance(caught, _Raised):  # ``type(error)`` in an except: its class
                return self.u.answer.members[caught.member]
        if target is isinstance or target is type:
            return self._type_test(frame, node, target)
        if target is len and len(node.args) == 1:
            return self._length(frame, node, self.eval(node.args[0], frame))
        helper = HELPERS.get(getattr(target, "__name__", ""))
        if helper is not None and helper[0] is target:
            arguments = [self.eval(a, frame) for a in node.args]
            return helper[1](self, frame, node, arguments)
        if getattr(target, "__replan_opaque__", False):
            arguments = [self.eval(a, frame) for a in node.args]
            return self._opaque(frame, node, target, arguments)
        if inspect.isfunction(target) and bodies.has_source(target):
            arguments = [self.eval(a, frame) for a in node.args]
            state, value = self.run_function(
                target, arguments, frame, state=frame.state, nodes=node.args
            )
            frame.state = state
            return value
        if callable(target):
            return self._input(frame, node)
        raise self.fail(frame, node, "call not understood")

    # -- the argument's type: inputs of the step ------------------------------------------

    def path_of(self, node: ast.AST | None, frame: Frame) -> ast.expr | None:
        """The expression of the event's argument ``node`` stands for (in the event
        parameter's name), or None when it is not a part of the argument."""
        if isinstance(node, ast.Name):
            return frame.paths.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.path_of(node.value, frame)
            return None if base is None else ast.Attribute(base, node.attr, ast.Load())
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            base = self.path_of(node.value, frame)
            return None if base is None else ast.Subscript(base, node.slice, ast.Load())
        return None

    def _atom(self, text: str) -> z3.BoolRef:
        if text not in self.inputs:
            self.inputs[text] = z3.Bool(text)
        return self.inputs[text]

    def _type_test(self, frame: Frame, node: ast.Call, function: Any) -> Any:
        """``isinstance(<argument>, T)`` is an input of the step; ``type(<argument>)``
        is one once compared with a class. Written in the event parameter's name
        (``type(obs.key) is str``) whichever local the body reads it from, so the same
        test is the same input in the declaration, a property and the generated code."""
        path = self.path_of(node.args[0], frame) if node.args else None
        if path is None:
            return self._input(frame, node)
        if function is type and len(node.args) == 1:
            return _TypeOf(ast.unparse(path))
        if function is isinstance and len(node.args) == 2:
            kinds = self.eval(node.args[1], frame)
            if not isinstance(kinds, Const):
                raise self.fail(frame, node, "isinstance of a class the translator cannot name")
            return self._atom(f"isinstance({ast.unparse(path)}, {_class_text(kinds.value)})")
        raise self.fail(frame, node, "type test not understood")

    def _opaque(
        self, frame: Frame, node: ast.Call, function: Any, arguments: list[Any]
    ) -> z3.ExprRef:
        """A call of an ``@opaque`` function: an uninterpreted function of the z3 terms
        of its arguments (a record's fields, an optional value once present)."""
        terms: list[z3.ExprRef] = []
        for argument in arguments:
            terms.extend(self._terms(frame, node, argument))
        result = typing.get_type_hints(function).get("return")
        sort = z3.BoolSort() if result is bool else z3.IntSort()  # a str: one int per value
        declared = z3.Function(function.__name__, *(t.sort() for t in terms), sort)
        return declared(*terms)

    def _terms(self, frame: Frame, node: ast.AST, value: Any) -> list[z3.ExprRef]:
        if isinstance(value, Opt):
            self.require(frame, value.some, f"the argument of `{_where(node)}` is not None")
            return self._terms(frame, node, value.value)
        if isinstance(value, Record):
            return [
                t for name in value.fields for t in self._terms(frame, node, value.fields[name])
            ]
        if isinstance(value, z3.ExprRef):
            return [value]
        if isinstance(value, Const) and isinstance(value.value, str):
            return [z3.IntVal(self.u.intern(value.value))]
        if isinstance(value, Const) and isinstance(value.value, int):
            return [z3.IntVal(value.value)]
        raise self.fail(frame, node, f"an argument z3 cannot name: {value!r}")

    def _length(self, frame: Frame, node: ast.Call, value: Any) -> Any:
        if isinstance(value, Const):
            return Const(len(value.value))
        if isinstance(value, Tup):
            return Const(len(value.items))
        if isinstance(value, TraceLog):
            return value.count
        raise self.fail(frame, node, "len of a value the translator does not model")

    def _input(self, frame: Frame, node: ast.Call) -> z3.BoolRef:
        """A module function of the event's argument alone: a property of the input.
        A local standing for a part of the argument (``version`` after ``key, version,
        state, source = obs``) is that part: the input is written in the event
        parameter's name (``in_bounds(obs.version)``), so the same test is the same
        input wherever it is written."""
        used = {n.id for a in node.args for n in ast.walk(a) if isinstance(n, ast.Name)}
        parts = {n for n in used if n in frame.paths}
        free = {
            n
            for n in used - parts
            if n not in frame.parameters and n not in self.globals and not hasattr(builtins, n)
        }
        if (
            not (used & frame.parameters or parts)
            or free
            or any(
                isinstance(n, ast.Name) and n.id == "self" for a in node.args for n in ast.walk(a)
            )
        ):
            raise self.fail(frame, node, "a call over the run's fields is not understood")
        text = _where(_InParameterNames(frame.paths).visit(copy.deepcopy(node)))
        if text not in self.inputs:
            self.inputs[text] = z3.Bool(text)
        return self.inputs[text]

    def _quantifier(self, frame: Frame, node: ast.Call, is_any: bool) -> Any:
        if len(node.args) != 1 or not isinstance(node.args[0], ast.GeneratorExp):
            raise self.fail(frame, node, "any/all over a generator expression only")
        generator = node.args[0]
        if len(generator.generators) != 1 or generator.generators[0].is_async:
            raise self.fail(frame, node, "one `for` clause only")
        clause = generator.generators[0]
        iterable = self.eval(clause.iter, frame)
        if isinstance(clause.target, ast.Tuple) and all(
            isinstance(e, ast.Name) for e in clause.target.elts
        ):
            variables = [e.id for e in clause.target.elts if isinstance(e, ast.Name)]
        elif isinstance(clause.target, ast.Name):
            variables = [clause.target.id]
        else:
            raise self.fail(frame, node, "the loop variable must be a name or a tuple of names")

        def holds_for(bindings: dict[str, Any]) -> tuple[z3.BoolRef, z3.BoolRef]:
            inner = frame.inner(env={**frame.env, **bindings})
            conditions = [self.boolean(inner, self.eval(c, inner)) for c in clause.ifs]
            return all_of(*conditions), self.boolean(inner, self.eval(generator.elt, inner))

        def unroll(collection: Any) -> z3.BoolRef:
            if isinstance(collection, ContentMap) and len(variables) == 2 and not is_any:
                # "every remembered (key, version)": stated for one arbitrary pair, free
                # constants named after the loop, so the same statement about the state
                # before and after a step speaks of the same pair. A validity proof over
                # free constants holds for all of them; z3's queries stay quantifier-free.
                where = ast.unparse(clause.iter)
                key = z3.Const(f"any {variables[0]} of {where}", self.u.key.sort)
                version = z3.Int(f"any {variables[1]} of {where}")
                condition, value = holds_for({variables[0]: key, variables[1]: version})
                seen = CONTENT.is_some(z3.Select(collection.array, key, version))
                return z3.Implies(all_of(seen, condition), value)
            if not isinstance(collection, Const):
                raise self.fail(frame, node, "iteration over a symbolic collection")
            parts = []
            for element in collection.value:
                values = element if len(variables) > 1 else (element,)
                bindings = {name: Const(item) for name, item in zip(variables, values, strict=True)}
                condition, value = holds_for(bindings)
                parts.append(all_of(condition, value) if is_any else z3.Implies(condition, value))
            return any_of(*parts) if is_any else all_of(*parts)

        return self.lift(frame, iterable, unroll)

    def _call_bound(self, frame: Frame, node: ast.Call, bound: _Bound, arguments: list[Any]) -> Any:
        receiver, name = bound.receiver, bound.name
        if isinstance(receiver, FMap) and name == "get" and 1 <= len(arguments) <= 2:
            return self.map_get(
                frame, receiver, arguments[0], arguments[1] if len(arguments) == 2 else None
            )
        if isinstance(receiver, ContentMap) and name == "get" and len(arguments) == 1:
            return self.content_entry(frame, receiver, arguments[0])
        if isinstance(receiver, FSet) and name == "issuperset" and len(arguments) == 1:

            def superset(collection: Any) -> z3.BoolRef:
                if not isinstance(collection, Const):
                    raise self.fail(frame, node, "issuperset of a symbolic collection")
                return all_of(
                    *(receiver.members.get(str(k), z3.BoolVal(False)) for k in collection.value)
                )

            return self.lift(frame, arguments[0], superset)
        pure = name in ("get", "issuperset", "issubset", "count", "index")
        if pure and isinstance(receiver, Const) and all(isinstance(a, Const) for a in arguments):
            return Const(getattr(receiver.value, name)(*(a.value for a in arguments)))
        raise self.fail(frame, node, f"method {name!r} is not understood here")

    # -- statements ------------------------------------------------------------------------


def _flattened(options: tuple[tuple[z3.BoolRef, Any], ...]) -> Choice:
    """A choice among choices as one: each inner option under both conditions."""
    flat: list[tuple[z3.BoolRef, Any]] = []
    for condition, value in options:
        if isinstance(value, Choice):
            flat.extend((all_of(condition, inner), option) for inner, option in value.options)
        else:
            flat.append((condition, value))
    return Choice(tuple(flat))
