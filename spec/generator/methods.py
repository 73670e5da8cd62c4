"""One event method: its input check, its chains of transitions per state (nested
where guards share a first conjunct), and the fields and tuples read once.
"""

from __future__ import annotations

import ast
from collections import Counter
from enum import EnumMeta

import replan.controller.records as _records_module
from replan.spec.generator.common import GenerationError
from replan.spec.generator.inlining import Inlining
from replan.spec.generator.nodes import (
    _Arm,
    _Branch,
    _Chain,
    _Line,
    _most_on_a_path,
    _Node,
    _rewrite,
    _statement,
    _trees,
)
from replan.spec.generator.rewrite import (
    _bindings,
    _FieldsToLocals,
    _Flatten,
    _FunctionInliner,
    _is_self_attribute,
    _MembersToConstants,
    _SelfToLocals,
    _tuple_of_names,
    _TuplesToLocals,
    _upper_snake,
    _walk_outside_scopes,
)
from replan.spec.generator.stores import (
    _conjuncts,
    _fields_set_by_init,
    _row,
    _self_stores,
    _sharing_states,
    _state_constant,
    _stores_of_method,
)
from replan.spec.model import TransitionInfo


class Methods(Inlining):
    """Builds the nodes of one event method."""

    def check_nodes(self, event: str) -> list[_Node]:
        """The event's input check (inlined when it can be), then, for a record
        argument, its fields in locals (``self.fields``)."""
        interface = self.model.interface[event]
        check, parameter = interface.check, interface.parameter
        assert check is not None and parameter is not None and self.scope is not None
        record = getattr(_records_module, interface.parameter_type or "", None)
        fields: tuple[str, ...] = ()
        if isinstance(record, type) and issubclass(record, tuple):
            fields = tuple(getattr(record, "_fields", ()))
        body = self.inline_body(check, event)
        if body is None or body.answer is not None:
            nodes: list[_Node] = [_Line(_statement(self.body_call(check, parameter)))]
            statements: list[ast.stmt] = []
        else:
            nodes = [_Line(None, f"check: {check}")]
            statements = body.statements
        unpacked = next(
            (
                index
                for index, s in enumerate(statements)
                if isinstance(s, ast.Assign)
                and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Tuple)
                and len(s.targets[0].elts) == len(fields)
                and all(isinstance(e, ast.Name) for e in s.targets[0].elts)
                and isinstance(s.value, ast.Name)
                and s.value.id == parameter
                and all(
                    _bindings(statements, e.id) == 1  # type: ignore[attr-defined]
                    for e in s.targets[0].elts
                )
            ),
            None,
        )
        if fields and unpacked is not None:
            target = statements[unpacked].targets[0]  # type: ignore[attr-defined]
            self.fields = dict(zip(fields, (e.id for e in target.elts), strict=True))
            rewrite = _FieldsToLocals(parameter, self.fields)
            statements[unpacked + 1 :] = [rewrite.visit(s) for s in statements[unpacked + 1 :]]
        nodes.extend(_Line(s) for s in statements)
        if fields and unpacked is None:
            self.fields = {f: self.scope.fresh(f) for f in fields}
            nodes.append(_Line(_statement(f"{', '.join(self.fields.values())} = {parameter}")))
        return nodes

    # -- the dispatch -----------------------------------------------------------------

    def transition_nodes(self, transition: TransitionInfo) -> list[_Node]:
        """One transition's code; for a row every state in ``self.sharing`` has (the
        same guard, action and target), one copy with the fired index chosen by state."""
        action, raises = self.action_nodes(transition.action, transition.event)
        rows = self._same_rows(transition)
        if len(rows) == 1:
            comment, fired = f"{transition.index}: {transition.label}", str(transition.index)
        else:
            sources = "|".join(t.source for t in rows)
            label = transition.label.replace(f"{transition.source} --", f"{sources} --", 1)
            if _row(transition)[2] is None:  # each stays where it is
                label = label.rsplit("--> ", 1)[0] + "--> (stays)"
            comment = f"{', '.join(str(t.index) for t in rows)}: {label}"
            fired = str(rows[-1].index)
            for row in reversed(rows[:-1]):
                constant = _state_constant(self.model.state(row.source))
                fired = f"{row.index} if current == {constant} else {fired}"
        nodes: list[_Node] = [_Line(None, comment), _Line(_statement(f"fired = {fired}")), *action]
        moves = _row(transition)[2] is not None and (
            transition.target != transition.source or len(rows) > 1
        )
        if moves and not raises:
            target = _state_constant(self.model.state(transition.target))
            nodes.append(_Line(_statement(f"self._declared_state = {target}")))
        return nodes

    def _same_rows(self, transition: TransitionInfo) -> list[TransitionInfo]:
        """The transition and its copies out of the other states that share its chain
        (the states of ``self.sharing``), in their order."""
        if len(self.sharing) < 2:
            return [transition]
        position = transition.priority - 1
        return [self.model.leaving(s, transition.event)[position] for s in self.sharing]

    def branch_nodes(self, branches: list[_Branch], event: str) -> list[_Node]:
        arms: list[_Arm] = []
        index = 0
        while index < len(branches):
            branch = branches[index]
            if not branch.conjuncts:
                nodes = self.transition_nodes(branch.transition)
                if not arms:
                    return nodes
                arms.append(_Arm(None, "", nodes))
                return [_Chain(arms)]  # anything after it is unreachable
            head = ast.dump(branch.conjuncts[0])
            end = index + 1
            while (
                end < len(branches)
                and branches[end].conjuncts
                and ast.dump(branches[end].conjuncts[0]) == head
            ):
                end += 1
            group = branches[index:end]
            if len(group) > 1 and len(group[-1].conjuncts) == 1:
                test, names = self.condition(branch.conjuncts[:1], event)
                inner = [_Branch(b.conjuncts[1:], b.transition) for b in group]
                arms.append(_Arm(test, names, self.branch_nodes(inner, event)))
                index = end
            else:
                test, names = self.condition(branch.conjuncts, event)
                arms.append(_Arm(test, names, self.transition_nodes(branch.transition)))
                index += 1
        message = f"raise AssertionError(f'no declared transition for {event} in {{current!r}}')"
        arms.append(_Arm(None, "", [_Line(_statement(message))]))
        return [_Chain(arms)]

    def method_body(self, event: str) -> list[_Node]:
        """The statements inside the event method's ``try``."""
        interface = self.model.interface[event]
        parameter = interface.parameter
        nodes: list[_Node] = []
        if interface.check:
            nodes.extend(self.check_nodes(event))
        checked = len(nodes)
        nodes.append(_Line(_statement("current = self._declared_state")))
        arms = []
        for sharing in _sharing_states(self.model, event):
            constants = [_state_constant(self.model.state(s)) for s in sharing]
            test = (
                f"current == {constants[0]}"
                if len(sharing) == 1
                else f"current in ({', '.join(constants)})"
            )
            self.sharing = sharing
            first = self.model.leaving(sharing[0], event)
            branches = self.branch_nodes([_Branch(_conjuncts(t), t) for t in first], event)
            self.sharing = ()
            arms.append(_Arm(ast.parse(test, mode="eval").body, "", branches))
        stopped, _ = self.action_nodes(interface.when_stopped, event)
        if arms:
            arms.append(_Arm(None, "a final state: the run stopped, nothing changes", stopped))
            nodes.append(_Chain(arms))
        else:
            nodes.extend(stopped)
        _rewrite(nodes, _FunctionInliner(self))
        _rewrite(nodes, _Flatten())
        # Fields of self read into locals, for the whole body.
        assert self.scope is not None
        self.scope.taken.update(
            n.id for tree in _trees(nodes) for n in ast.walk(tree) if isinstance(n, ast.Name)
        )
        fields = self._fields_read_once(nodes)
        if fields:
            _rewrite(nodes, _SelfToLocals(fields))
            bindings = [_Line(_statement(f"{local} = self.{f}")) for f, local in fields.items()]
            nodes[:0] = bindings
            checked += len(bindings)
        # Tuples of never-rebound locals, for the dispatch after the check.
        invariant = {parameter, *self.fields.values(), *fields.values()} - {None}
        tuples = self._tuples_built_once(nodes[checked:], invariant)  # type: ignore[arg-type]
        if tuples:
            _rewrite(nodes[checked:], _TuplesToLocals(tuples))
            nodes[checked:checked] = [
                _Line(_statement(f"{local} = ({', '.join(names)})"))
                for names, local in tuples.items()
            ]
        _rewrite(nodes, _MembersToConstants(self))
        return nodes

    def constant(self, enumeration: str, member: str) -> str:
        """The module constant standing for ``enumeration.member`` (declared once)."""
        qualified = f"{enumeration}.{member}"
        if qualified not in self.constants:
            enumerations = [*vars(_records_module).values(), *self.globals.values()]
            shared = any(
                isinstance(other, EnumMeta)
                and other.__name__ != enumeration
                and member in other.__members__
                for other in enumerations
            )
            value = self.globals[enumeration].__members__[member]  # type: ignore[attr-defined]
            same = [n for n, v in self.globals.items() if v is value and n.isupper()]
            if same:
                name = same[0]
            else:
                name = f"{_upper_snake(enumeration)}_{member}" if shared else member
                if name in self.globals or name in self.constants.values():
                    raise GenerationError(f"{qualified}: the constant {name!r} is taken")
            self.constants[qualified] = name
        return self.constants[qualified]

    def _fields_read_once(self, nodes: list[_Node]) -> dict[str, str]:
        """The fields of ``self`` to read into locals: read twice or more along one
        path, always set by ``__init__``, rebound neither here nor by any method still
        called from here. Field -> local, in order of first use."""
        assert self.scope is not None
        candidates = _fields_set_by_init(self.model_class)
        trees = list(_trees(nodes))
        rebound: set[str] = set()
        for tree in trees:
            stores = _self_stores(tree)
            if stores is None:
                return {}
            rebound |= stores
            for call in ast.walk(tree):
                if isinstance(call, ast.Call) and _is_self_attribute(call.func):
                    called = _stores_of_method(self.model_class, call.func.attr, set())
                    if called is None:
                        return {}
                    rebound |= called

        def reads(tree: ast.AST) -> Counter[str]:
            return Counter(
                n.attr
                for n in _walk_outside_scopes(tree)
                if _is_self_attribute(n) and isinstance(n.ctx, ast.Load)
            )

        order = [field for tree in trees for field in reads(tree)]
        most = _most_on_a_path(nodes, reads)
        return {
            field: self.scope.fresh(field.lstrip("_") or field)
            for field in dict.fromkeys(order)
            if field in candidates and field not in rebound and most[field] >= 2
        }

    def _tuples_built_once(
        self, nodes: list[_Node], invariant: set[str]
    ) -> dict[tuple[str, ...], str]:
        assert self.scope is not None

        def built(tree: ast.AST) -> Counter[tuple[str, ...]]:
            return Counter(
                names
                for n in _walk_outside_scopes(tree)
                if (names := _tuple_of_names(n)) is not None and set(names) <= invariant
            )

        order = [names for tree in _trees(nodes) for names in built(tree)]
        most = _most_on_a_path(nodes, built)
        return {
            names: self.scope.fresh("_".join(names))
            for names in dict.fromkeys(order)
            if most[names] >= 2
        }
