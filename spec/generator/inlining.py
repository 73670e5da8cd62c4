"""Copying a body into the generated method: a guard as its expression, an action
or check as its statements, a module function written as one ``return``.
"""

from __future__ import annotations

import ast
import copy
import inspect

from replan.spec import bodies
from replan.spec.generator.common import (
    _FRAME_NAMES,
    _NOT_INLINED,
    GenerationError,
    _single_expression,
)
from replan.spec.generator.nodes import _Body, _Line, _Node, _statement
from replan.spec.generator.rewrite import (
    _eliminate_aliases,
    _FieldsToLocals,
    _FunctionInliner,
    _Inliner,
    _Rename,
    _Simplify,
)
from replan.spec.generator.state import GeneratorState


class Inlining(GeneratorState):
    """Copies guards, actions and module functions into the method being generated."""

    def guard_expression(self, name: str, arguments: list[str]) -> ast.expr | None:
        found = _single_expression(name, self.model_class)
        if found is None:
            return None
        parameters, expression = found
        mapping = dict(zip(parameters[1:], arguments, strict=True))
        renamed = _Rename(mapping).visit(ast.parse(ast.unparse(expression), mode="eval").body)
        module = inspect.getmodule(getattr(self.model_class, name))
        assert module is not None
        bound = {  # names a comprehension binds are local to the expression
            target.id
            for node in ast.walk(renamed)
            if isinstance(node, ast.comprehension)
            for target in ast.walk(node.target)
            if isinstance(target, ast.Name)
        }
        free = {
            node.id
            for node in ast.walk(renamed)
            if isinstance(node, ast.Name)
            and node.id not in bound
            and node.id not in parameters
            and node.id not in arguments
        }
        problem = self._globals_of(free, module, f"guard {name!r}")
        if problem is not None:
            raise GenerationError(problem)
        return _Simplify().visit(_Inliner(self).visit(renamed))  # type: ignore[no-any-return]

    def function_expression(self, name: str, arguments: list[str]) -> ast.expr | None:
        """The expression a module function ``name`` returns, its parameters being
        ``arguments``; None when it is not a global function written as one ``return``
        (or its body cannot be copied here)."""
        function = self.globals.get(name)
        if not inspect.isfunction(function) or name in self.inlining:
            return None
        definition = bodies.definition(function)
        if definition is None or definition.decorator_list:
            return None
        signature = definition.args
        parameters = [a.arg for a in signature.args]
        body = bodies.statements(definition)
        if (
            signature.posonlyargs
            or signature.vararg
            or signature.kwonlyargs
            or signature.kwarg
            or len(parameters) != len(arguments)
            or len(body) != 1
            or not isinstance(body[0], ast.Return)
            or body[0].value is None
        ):
            return None
        expression = copy.deepcopy(body[0].value)
        names = {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}
        bound = {
            n.id
            for n in ast.walk(expression)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        if bound & (set(parameters) | set(arguments)) or any(
            isinstance(n, _NOT_INLINED) or (isinstance(n, ast.Name) and n.id in _FRAME_NAMES)
            for n in ast.walk(expression)
        ):
            return None
        module = inspect.getmodule(function)
        if module is None:
            return None
        free = names - bound - set(parameters)
        if self._globals_of(free, module, f"function {name!r}") is not None:
            return None
        renamed = _Rename(dict(zip(parameters, arguments, strict=True))).visit(expression)
        self.inlining.add(name)  # a function that calls itself is copied once
        try:
            return _FunctionInliner(self).visit(renamed)  # type: ignore[no-any-return]
        finally:
            self.inlining.discard(name)

    def guard_call(self, name: str, event: str) -> ast.expr:
        """The guard as an expression in the event method's scope: inlined if it is a
        single expression, else a call."""
        parameter = self.model.interface[event].parameter
        wanted = self._parameters(name)
        if wanted and wanted != [parameter]:
            raise GenerationError(
                f"guard {name!r} takes {wanted}, but event {event!r} passes {parameter!r}"
            )
        inlined = self.guard_expression(name, wanted)
        if inlined is not None:
            return inlined
        call = self.body_call(name, ", ".join(wanted))
        return ast.parse(call, mode="eval").body

    def body_call(self, name: str, arguments: str) -> str:
        """A call of a body that is not inlined, through the bodies' class: a
        ``Controller`` does not offer its bodies (they are not the contract's API)."""
        return f"{self.model_class.__name__}.{name}(self{', ' if arguments else ''}{arguments})"

    def translate(self, tree: ast.expr, event: str) -> ast.expr:
        """The guard with each named guard's body inlined: what the generated
        controller evaluates, before the method-local rewrites (the z3 translation
        in ``verification/translate/symbolic.py`` reads this)."""
        if isinstance(tree, ast.Name):
            return self.guard_call(tree.id, event)
        if isinstance(tree, ast.UnaryOp):
            negated = ast.UnaryOp(op=ast.Not(), operand=self.translate(tree.operand, event))
            return _Simplify().visit(negated)  # type: ignore[no-any-return]
        if isinstance(tree, ast.BoolOp):
            return ast.BoolOp(op=tree.op, values=[self.translate(v, event) for v in tree.values])
        raise GenerationError(f"unsupported guard node {ast.dump(tree)}")

    def condition(self, conjuncts: list[ast.expr], event: str) -> tuple[ast.expr, str]:
        """(expression, comment naming the guards) for a conjunction."""
        names = " and ".join(ast.unparse(c) for c in conjuncts)
        translated = [self.translate(c, event) for c in conjuncts]
        expression = (
            translated[0] if len(translated) == 1 else ast.BoolOp(op=ast.And(), values=translated)
        )
        if self.fields:
            parameter = self.model.interface[event].parameter
            assert parameter is not None
            expression = _FieldsToLocals(parameter, self.fields).visit(expression)
        return expression, names

    # -- bodies -----------------------------------------------------------------------

    def inline_body(self, name: str, event: str) -> _Body | None:
        """The body of method ``name`` written into the method of ``event`` (see the
        module docstring), or None when it must be called instead."""
        definition = bodies.method_definition(self.model_class, name)
        if definition is None or self.scope is None:
            return None
        parameter = self.model.interface[event].parameter
        parameters = _simple_parameters(definition.args, parameter)
        body = bodies.statements(definition)
        if parameters is None or not _copyable(body):
            return None
        last = body[-1] if body else None
        answer: ast.expr | None = None
        raises = isinstance(last, ast.Raise)
        if isinstance(last, ast.Return):
            body, answer = body[:-1], last.value
        trees = [*body, *([answer] if answer is not None else [])]
        names = {n.id for t in trees for n in ast.walk(t) if isinstance(n, ast.Name)}
        locals_ = {
            n.id
            for t in trees
            for n in ast.walk(t)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        if locals_ & set(parameters) or (parameter in names and parameter not in parameters):
            return None
        module = inspect.getmodule(getattr(self.model_class, name))
        if module is None:
            return None
        free = names - locals_ - set(parameters)
        if self._globals_of(free, module, f"{name!r}") is not None:
            return None
        return self._rewritten(name, body, answer, raises, parameters, parameter, locals_)

    def _rewritten(
        self,
        name: str,
        body: list[ast.stmt],
        answer: ast.expr | None,
        raises: bool,
        parameters: list[str],
        parameter: str | None,
        locals_: set[str],
    ) -> _Body | None:
        """A copyable body of method ``name`` rewritten for the event's method: its
        parameters renamed to the method's, the guards it calls inlined, argument
        fields read from locals, aliases removed and locals given final names."""
        assert self.scope is not None
        # Parameters become the method's own names; locals get placeholders no source
        # can contain until their final names are chosen.
        mapping = {parameters[0]: "self"}
        if len(parameters) == 2:
            assert parameter is not None
            mapping[parameters[1]] = parameter
        mapping.update({local: f"${local}" for local in locals_})
        rename = _Rename(mapping)
        statements = [rename.visit(s) for s in body]
        if answer is not None:
            answer = rename.visit(answer)
        inline_guards = _Inliner(self)
        try:
            statements = [inline_guards.visit(s) for s in statements]
            if answer is not None:
                answer = inline_guards.visit(answer)
        except GenerationError:  # a guard it calls cannot be copied here: call the body
            return None
        if self.fields and parameter is not None:
            fields = _FieldsToLocals(parameter, self.fields)
            statements = [fields.visit(s) for s in statements]
            answer = None if answer is None else fields.visit(answer)
        statements, answer = _eliminate_aliases(statements, answer, {f"${n}" for n in locals_})
        remaining = sorted(
            {
                n.id
                for t in [*statements, *([answer] if answer is not None else [])]
                for n in ast.walk(t)
                if isinstance(n, ast.Name) and n.id.startswith("$")
            }
        )
        final = _Rename({p: self.scope.local(name, p[1:]) for p in remaining})
        statements = [ast.fix_missing_locations(final.visit(s)) for s in statements]
        if answer is not None:
            answer = final.visit(answer)
        if isinstance(answer, ast.Constant) and answer.value is None:
            answer = None
        return _Body(statements, answer, raises)

    def action_nodes(self, action: str, event: str) -> tuple[list[_Node], bool]:
        """``result = <the action's answer>``, the action inlined when it can be; and
        whether it always raises."""
        body = self.inline_body(action, event)
        if body is None:
            argument = self.model.interface[event].parameter or ""
            arguments = argument if self._parameters(action) else ""
            call = self.body_call(action, arguments)
            if self._returns_nothing(action):
                return [_Line(_statement(call)), _Line(_statement("result = None"))], False
            return [_Line(_statement(f"result = {call}"))], False
        nodes: list[_Node] = [_Line(None, f"action: {action}")]
        nodes.extend(_Line(s) for s in body.statements)
        if not body.raises:
            answer = body.answer if body.answer is not None else ast.Constant(value=None)
            assign = ast.Assign(targets=[ast.Name(id="result", ctx=ast.Store())], value=answer)
            nodes.append(_Line(ast.fix_missing_locations(assign)))
        return nodes, body.raises


def _simple_parameters(arguments: ast.arguments, parameter: str | None) -> list[str] | None:
    """The parameter names of a body that can be written into an event method: plain
    positional ``self`` and at most the event's argument, no defaults; else None."""
    parameters = [a.arg for a in arguments.args]
    if (
        arguments.posonlyargs
        or arguments.vararg
        or arguments.kwonlyargs
        or arguments.kwarg
        or arguments.defaults
        or not 1 <= len(parameters) <= 2
        or (len(parameters) == 2 and parameter is None)
    ):
        return None
    return parameters


def _copyable(body: list[ast.stmt]) -> bool:
    """No statement a copy would change the meaning of: nothing in ``_NOT_INLINED``,
    no bare ``raise``, no frame names, and a ``return`` only as the last statement."""
    last = body[-1] if body else None
    for tree in body:
        for node in ast.walk(tree):
            if (
                isinstance(node, _NOT_INLINED)
                or (isinstance(node, ast.Raise) and node.exc is None)
                or (isinstance(node, ast.Name) and node.id in _FRAME_NAMES)
                or (isinstance(node, ast.Return) and node is not last)
            ):
                return False
    return True
