"""The declaration, the bodies, the policy and the properties as a Promela model: the
third target of the translator that produces z3, for ``replan explore --engine spin``.

Owns writing the model: one ``d_step`` per call of the domains (``calls.py``).
Each ``d_step`` saves the state, assigns the post-state and the answer (specialised
to each declared state the run can be in), and asserts every property the z3
translation covers, each under its own name. Leaves the layout and the lowering of
z3 terms to ``verification/translate/layout.py``, the expressions to
``verification/translate/ir.py``, running SPIN and replaying its trails to
``verification/engines/spin/engine.py``.

Nothing about the controller is written here: the post-state, the answer and each
property are the very z3 terms ``replan prove`` reasons about
(``symbolic.encode_event``, ``property_terms.call_term``, ``property_terms.state_term``), with the
call's argument substituted (a plan's revisions stay terms over the state: the
domains propose ``plan_revision + offset``) and the free inputs (``type(plan.id) is
str``) pinned to their values on the concrete argument, exactly as the conformance
test pins them. A property the z3 translation cannot read (one about the trace) is
listed as unchecked, never dropped silently.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.policy import Policy, policy_to_dict
from replan.controller.records import Plan
from replan.controller.run import Run
from replan.spec.contract import Contract
from replan.spec.model import MachineModel
from replan.spec.vocabulary import Property
from replan.verification.core.domains import Domains
from replan.verification.translate.calls import RELATIVE_FIELDS, Call, call_text, domain_calls
from replan.verification.translate.ir import (
    IR,
    TRUE,
    Context,
    Printer,
    add_fact,
    const,
    equal,
    var,
)
from replan.verification.translate.layout import SHORT_RANGE, Layout
from replan.verification.translate.lower import Lowerer
from replan.verification.translate.property_terms import call_term, state_term
from replan.verification.translate.symbolic import (
    ContentMap,
    FMap,
    FSet,
    IdSet,
    Opt,
    Record,
    State,
    StepEncoding,
    TranslationError,
    Translator,
    Universe,
    abstract_argument,
    encode_event,
    fresh_state,
    initial_state,
    input_values,
)

# ---- the model --------------------------------------------------------------------------------


@dataclass
class PromelaModel:
    """The translated model, and what it does and does not check."""

    text: str
    calls: list[Call]
    checked: list[str]  # the properties asserted after every call they apply to
    unchecked: dict[str, str]  # property -> why the translation cannot check it
    initial_failures: list[str]  # state invariants the initial state breaks
    digest: str


def translate(
    policy: Policy,
    domains: Domains,
    model: MachineModel,
    model_class: type = Run,
    progress: Callable[[str], None] | None = None,
    contract: Contract | None = None,
) -> PromelaModel:
    """The Promela model of ``model`` with ``model_class``'s bodies under ``policy``,
    over ``domains``, asserting ``contract``'s properties (default: the project's)."""
    calls = domain_calls(policy, domains, model)
    translation = Translation(policy, model, model_class, calls, domains.versions, contract)
    blocks: list[str] = []
    temps = 0
    by_event: dict[str, list[Call]] = {}
    for call in calls:
        by_event.setdefault(call.event, []).append(call)
    for event, event_calls in by_event.items():
        if progress is not None:
            progress(f"translating {event} ({len(event_calls)} calls)")
        for block, used in translation.event_blocks(event, event_calls):
            blocks.append(block)
            temps = max(temps, used)
    checked = sorted(translation.checked)
    text = _assemble(translation.layout, model, domains, blocks, temps, checked)
    return PromelaModel(
        text=text,
        calls=calls,
        checked=checked,
        unchecked=translation.unchecked,
        initial_failures=translation.initial_failures(),
        digest=f"sha256:{hashlib.sha256(text.encode()).hexdigest()}",
    )


class Translation:
    """The shared parts of one translation: the universe, the layout, the properties'
    z3 terms over a fresh post-state, and which properties are checked."""

    def __init__(
        self,
        policy: Policy,
        model: MachineModel,
        model_class: type,
        calls: Sequence[Call],
        versions: int,
        contract: Contract | None = None,
    ) -> None:
        if contract is None:
            from replan.spec.properties import CONTRACT

            contract = CONTRACT
        self.contract = contract
        self.policy = policy
        self.model_class = model_class
        self.u = u = Universe(policy, model)
        id_events = {e for e, i in model.interface.items() if i.parameter_type == "str"}
        ids = {u.intern(c.argument.id) for c in calls if isinstance(c.argument, Plan)}
        ids |= {u.intern(c.argument) for c in calls if c.event in id_events}
        self.layout = Layout(u, sorted(ids), versions)
        self.translator = Translator(u, model_class)
        self.post = fresh_state(u, "post")
        self.answer = z3.Const("answer", u.answer.sort)
        self.post_scalars, self.post_arrays = self.layout.bind(self.post, "")
        self.unchecked: dict[str, str] = {}
        self.invariants: dict[str, z3.BoolRef] = {}
        self.invariant_properties = contract.of_kind("invariant") + contract.of_kind("auxiliary")
        for prop in self.invariant_properties:
            term = self._term(prop, lambda p: state_term(self.translator, p, self.post))
            if term is not None:
                self.invariants[prop.name] = term
        self.checked = set(self.invariants)

    def _term(
        self, prop: Property, make: Callable[[Property], z3.BoolRef], where: str = ""
    ) -> z3.BoolRef | None:
        try:
            return make(prop)
        except TranslationError as error:
            self.unchecked[prop.name] = f"{where}{error}"
            return None

    def initial_failures(self) -> list[str]:
        """The state invariants the initial state breaks (decided here, in z3)."""
        state = initial_state(self.u)
        return [
            prop.name
            for prop in self.invariant_properties
            if prop.name not in self.unchecked
            and not z3.is_true(z3.simplify(state_term(self.translator, prop, state)))
        ]

    def call_properties(
        self,
        event: str,
        encoding: StepEncoding,
        pre_scalars: dict[str, IR],
        invariants: bool = True,
    ) -> dict[str, z3.BoolRef]:
        """The call properties of ``event`` over the step's pre-state, argument and a
        fresh post-state and answer, and (with ``invariants``) the state invariants;
        each free constant ("every remembered (key, version)") unrolled over the
        domains."""
        step = dataclasses.replace(encoding, post=self.post, answer=self.answer)
        terms: dict[str, z3.BoolRef] = {}
        for prop in self.contract.of_kind("call"):
            if not prop.applies_to(event):
                continue
            if not encoding.models(prop):
                self.unchecked[prop.name] = "reads the trace, which the relation does not model"
                continue
            term = self._term(prop, lambda p: call_term(self.translator, p, step), f"on {event}: ")
            if term is not None:
                terms[prop.name] = term
        self.checked.update(terms)
        bound = {*pre_scalars, *self.post_scalars, "answer"}
        bound |= {str(symbol) for symbol in _argument_symbols(encoding)}
        unrolled = {
            name: _for_every_free(self.u, self.layout, term, bound) for name, term in terms.items()
        }
        if invariants:
            unrolled.update(self.unrolled_invariants)
        return unrolled

    @functools.cached_property
    def unrolled_invariants(self) -> dict[str, z3.BoolRef]:
        """The state invariants, each free constant unrolled over the domains: once,
        not per event (an invariant reads the post-state alone)."""
        bound = {*self.post_scalars}
        return {
            name: _for_every_free(self.u, self.layout, term, bound)
            for name, term in self.invariants.items()
        }

    def lowered(
        self, event: str, calls: Sequence[Call], invariants: bool = True
    ) -> list[LoweredCall]:
        """Each call of ``event`` lowered: its assignments, answer and property flags
        over the pre-state (``b_`` variables), the post-state and the answer; the
        state invariants among the flags only with ``invariants`` (the kernel checks
        them once per new state, not per call)."""
        encoding = encode_event(self.u, event, self.model_class, prefix=f"{event}.")
        pre_scalars, pre_arrays = self.layout.bind(encoding.pre, "b_")
        properties = self.call_properties(event, encoding, pre_scalars, invariants)
        scalars = {**pre_scalars, **self.post_scalars, "answer": var("answer")}
        arrays = {**pre_arrays, **self.post_arrays}
        checker = self.model_class(self.policy)
        out = []
        # one lowerer for every call of the event: z3 shares equal terms, so what the
        # calls' arguments leave alike (most of each term) is lowered once
        lower = Lowerer(self.layout, scalars, arrays)
        for call in calls:
            substitution = _argument_substitution(self.u, encoding, call, checker, self.translator)
            settle = _Settle(substitution)
            assigned = [
                (name, value)
                for name, value in self.layout.assignments(_map_state(encoding.post, settle), lower)
                if value != var(f"b_{name}")
            ]
            answer = lower.scalar(settle(encoding.answer))
            flags = [(name, lower.scalar(settle(term))) for name, term in properties.items()]
            fired = lower.scalar(settle(encoding.fired))
            offered = TRUE
            if call.offered:
                guard = z3.And(*(c.term(encoding.pre, self.u) for c in call.offered))
                offered = lower.scalar(z3.simplify(guard))
            out.append(LoweredCall(call, assigned, answer, flags, fired, offered))
        return out

    def event_blocks(self, event: str, calls: Sequence[Call]) -> list[tuple[str, int]]:
        """Each call of ``event`` as a ``d_step`` (and the temps it uses)."""
        return [
            _call_block(
                lowered.call,
                self.layout,
                lowered.assigned,
                lowered.answer,
                lowered.flags,
                set(self.invariants),
            )
            for lowered in self.lowered(event, calls)
        ]

    def state_invariants(self) -> list[tuple[str, IR]]:
        """The state invariants as IR over the state's own (unprefixed) variables."""
        lower = Lowerer(self.layout, self.post_scalars, self.post_arrays)
        return [(name, lower.scalar(term)) for name, term in self.unrolled_invariants.items()]


@dataclass
class LoweredCall:
    """One call of the domains as IR: the assignments of the post-state (variables
    the call may change), the answer, and each property's flag (over ``b_`` pre-state
    variables, the post-state's variables and ``answer``)."""

    call: Call
    assigned: list[tuple[str, IR]]
    answer: IR
    flags: list[tuple[str, IR]]
    #: the index of the declared transition the call fires (-1: none, the input check
    #: refused it or a stopped run absorbed it), over the pre-state
    fired: IR
    #: whether a state offers the call, over the pre-state (``Call.offered``)
    offered: IR = TRUE


class _Settle:
    """A term with the call's argument substituted, simplified."""

    def __init__(self, substitution: list[tuple[z3.ExprRef, z3.ExprRef]]) -> None:
        self.substitution = substitution

    def __call__(self, term: z3.ExprRef) -> z3.ExprRef:
        if self.substitution:
            term = z3.substitute(term, *self.substitution)
        return z3.simplify(term)


def _call_block(
    call: Call,
    layout: Layout,
    assigned: list[tuple[str, IR]],
    answer: IR,
    flags: list[tuple[str, IR]],
    invariants: set[str],
) -> tuple[str, int]:
    """One call as a ``d_step``: the state saved; one branch per group of declared
    states in which the call does the same (the relation specialised to each state
    and folded), assigning the post-state and the answer; then the call properties
    asserted, and the state invariants when the branch may have changed the state (a
    state the call leaves as it was has been checked when it was first reached)."""
    context = Context(layout.rewrites("b_"))
    branches, temps = _branches(layout, context, assigned, answer)
    folded = [(name, context.run(node, {})) for name, node in flags]
    printer = Printer(temps)
    calls = [(name, node) for name, node in folded if name not in invariants]
    states = [(name, node) for name, node in folded if name in invariants]
    checks = _asserts(printer, calls)
    state_checks = _asserts(printer, states)
    changing = {bool(changed) for _, _, changed in branches}
    indent = "\n       "
    head = [f"call = {call.number}"] + [f"b_{name} = {name}" for name in layout.variables()]
    text = "  :: d_step { /* " + call_text(call) + " */" + indent
    text += (";" + indent).join(head) + ";" + indent
    if len(branches) == 1:
        text += (";" + indent).join(branches[0][1]) + ";" + indent
    else:
        text += "if" + indent
        inner = indent + "   "
        for modes, body, changed in branches:
            guard = " || ".join(f"b_{layout.mode_name} == {value}" for value in modes)
            if changing == {True, False}:
                body = [*body, f"changed = {int(changed)}"]
            text += f":: ({guard}) ->" + inner + (";" + inner).join(body) + indent
        text += "fi;" + indent
    if checks:
        text += (";" + indent).join(checks) + ";" + indent
    if state_checks and True in changing:
        if changing == {True, False}:
            inner = indent + "   "
            state_checks = ["if", ":: changed ->" + inner + (";" + inner).join(state_checks)]
            state_checks.append(":: else -> skip" + indent + "fi")
            text += indent.join(state_checks) + ";" + indent
        else:
            text += (";" + indent).join(state_checks) + ";" + indent
    text += 'printf("CALL %d\\n", call)\n     }'
    return text, printer.next_temp


def _branches(
    layout: Layout, context: Context, assigned: list[tuple[str, IR]], answer: IR
) -> tuple[list[tuple[list[int], list[str], bool]], int]:
    """(declared states, statements, whether any variable is assigned) per group of
    declared states in which the call does the same, and the temps they use."""
    mode = layout.mode_name
    groups: dict[tuple[Any, ...], list[int]] = {}
    for value in range(len(layout.u.mode.members)):
        known: dict[IR, Any] = {}
        add_fact(known, equal(var(f"b_{mode}"), const(value)), True)
        branch_assigned = tuple(
            (name, specialized)
            for name, node in assigned
            if (specialized := context.run(node, known)) != var(f"b_{name}")
            and not (name == mode and specialized == const(value))
        )
        key = (branch_assigned, context.run(answer, known))
        groups.setdefault(key, []).append(value)
    temps = 0
    branches: list[tuple[list[int], list[str], bool]] = []
    for (branch_assigned, branch_answer), modes in groups.items():
        printer = Printer(0)
        printer.share([value for _, value in branch_assigned] + [branch_answer])
        body = list(printer.lines)
        # An int is computed into an int temp and its range checked before it is
        # stored: storing into a short would wrap silently.
        low, high = SHORT_RANGE
        stores = []
        for name, value in branch_assigned:
            text = printer.text(value)
            if name in layout.ints and not (value[0] == "c" and low <= value[1] <= high):
                temp = f"t{printer.next_temp}"
                printer.next_temp += 1
                body += [
                    f"{temp} = {text}",
                    f"int_range = ({temp} >= {low} && {temp} <= {high})",
                    "assert(int_range)",
                ]
                text = temp
            stores.append(f"{name} = {text}")
        body += stores
        body.append(f"answer = {printer.text(branch_answer)}")
        temps = max(temps, printer.next_temp)
        branches.append((modes, body, bool(branch_assigned)))
    return branches, temps


def _asserts(printer: Printer, flags: list[tuple[str, IR]]) -> list[str]:
    """Each property computed into its own flag and asserted (a violation then names
    it), shared subexpressions first."""
    printer.lines = []
    printer.share([node for _, node in flags])
    lines = list(printer.lines)
    for name, node in flags:
        flag = _flag(name)
        lines += [f"{flag} = {printer.text(node)}", f"assert({flag})"]
    return lines


def _flag(name: str) -> str:
    return "p_" + name.replace("-", "_")


def _map_state(state: State, settle: Callable[[z3.ExprRef], z3.ExprRef]) -> State:
    def walk(value: Any) -> Any:
        if isinstance(value, z3.ExprRef):
            return settle(value)
        if isinstance(value, Opt):
            return Opt(walk(value.some), walk(value.value))
        if isinstance(value, Record):
            return Record(value.kind, {n: walk(v) for n, v in value.fields.items()})
        if isinstance(value, FMap):
            return FMap(value.domain, {k: walk(value.entries[k]) for k in value.entries})
        if isinstance(value, FSet):
            return FSet(value.domain, {k: walk(v) for k, v in value.members.items()})
        if isinstance(value, IdSet):
            return IdSet(settle(value.array))
        if isinstance(value, ContentMap):
            return ContentMap(settle(value.array))
        return value

    return {name: walk(value) for name, value in state.items()}


def _argument_substitution(
    u: Universe,
    encoding: StepEncoding,
    call: Call,
    checker: Any,
    translator: Translator,
) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
    """(symbol, value) pairs putting the call's argument into the step relation: its
    abstraction, a plan's revisions as terms over the state, the inputs pinned."""
    pairs: list[tuple[z3.ExprRef, z3.ExprRef]] = []
    concrete = abstract_argument(u, call.event, call.argument)
    symbolic = encoding.argument
    derived = dict(call.derived)
    if isinstance(symbolic, Record):
        if concrete is None:
            raise TranslationError(f"{call_text(call)}: its argument has no abstraction")
        for name, term in symbolic.fields.items():
            if isinstance(call.argument, Plan) and name in RELATIVE_FIELDS:
                offset = getattr(call.argument, name)
                pairs.append((term, encoding.pre[RELATIVE_FIELDS[name]] + offset))
            elif name in derived:
                pairs.append((term, derived[name].term(encoding.pre, u)))
                pairs += derived[name].facts(encoding.pre)
            elif concrete.fields[name] is not None:
                pairs.append((term, concrete.fields[name]))
    elif isinstance(symbolic, z3.ExprRef):
        pairs.append((symbolic, concrete))
    values = input_values(u, encoding, call.argument, translator.globals, checker)
    for text, term in encoding.inputs.items():
        if text not in values:
            raise TranslationError(f"{call_text(call)}: the input {text!r} has no value")
        pairs.append((term, z3.BoolVal(values[text])))
    return pairs


def _argument_symbols(encoding: StepEncoding) -> list[z3.ExprRef]:
    """The symbols standing for the call's argument and its pinned inputs."""
    symbols: list[z3.ExprRef] = list(encoding.inputs.values())
    if isinstance(encoding.argument, Record):
        symbols += list(encoding.argument.fields.values())
    elif isinstance(encoding.argument, z3.ExprRef):
        symbols.append(encoding.argument)
    return symbols


#: The free constants the z3 translator names for "every remembered (key, version)"
#: (``symbolic.Translator._quantifier``).
_EVERY = re.compile(r"any \w+ of .+")


def _for_every_free(
    u: Universe, layout: Layout, formula: z3.BoolRef, bound: set[str]
) -> z3.BoolRef:
    """A formula with free constants (a property's "every remembered (key, version)",
    stated for one arbitrary pair) as the conjunction over the domains' values: keys
    and versions outside them have no content, where such a statement holds."""
    free = sorted(
        (c for c in _constants(formula) if c.decl().name() not in bound),
        key=str,
    )
    if not free:
        return formula
    stray = [str(c) for c in free if not _EVERY.fullmatch(c.decl().name())]
    if stray:  # only the translator's "every remembered (key, version)" is unrolled
        raise TranslationError(f"Promela: a property mentions unbound constants {stray}")
    choices: list[list[z3.ExprRef]] = []
    for constant in free:
        if constant.sort() == u.key.sort:
            choices.append(list(u.key.members.values()))
        elif constant.sort() == z3.IntSort():
            choices.append([z3.IntVal(v) for v in range(1, layout.versions + 1)])
        else:
            raise TranslationError(f"Promela: a free constant {constant} of sort {constant.sort()}")
    parts = [formula]
    for constant, values in zip(free, choices, strict=True):
        parts = [z3.substitute(p, (constant, v)) for p in parts for v in values]
    return z3.simplify(z3.And(*parts))


def _constants(term: z3.ExprRef) -> list[z3.ExprRef]:
    seen: set[int] = set()
    found: dict[str, z3.ExprRef] = {}
    stack = [term]
    while stack:
        node = stack.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if z3.is_quantifier(node):
            stack.append(node.body())
            continue
        if (
            z3.is_const(node)
            and node.decl().kind() == z3.Z3_OP_UNINTERPRETED
            and not isinstance(node.sort(), z3.ArraySortRef)
        ):
            found[node.decl().name()] = node
        stack.extend(node.children())
    return list(found.values())


def _limits_text(policy: Policy) -> str:
    limits = policy_to_dict(policy)["limits"]
    return ", ".join(f"{name} {value}" for name, value in limits.items())


def _assemble(
    layout: Layout,
    model: MachineModel,
    domains: Domains,
    blocks: list[str],
    temps: int,
    checked: list[str],
) -> str:
    u = layout.u
    lines = [
        "/* GENERATED by `replan explore --engine spin` from replan.spec.declaration, the",
        " * run's bodies, the policy and spec/properties.py; do not edit.",
        f" * Declaration digest: {model.digest}",
        f" * Policy limits: {_limits_text(u.policy)}; domains: {domains.name}"
        f" (versions 1..{domains.versions}, ids {domains.ids}).",
        " * One d_step per call of the domains: the post-state and the answer are the z3",
        " * step relation's terms, the asserts the properties'",
        " * (verification/translate/promela.py).",
        " * Enumerations (value = position):",
    ]
    for domain in (u.mode, u.evidence, u.key, u.step, u.resource, u.answer):
        names = ", ".join(f"{i}={m}" for i, m in enumerate(domain.members))
        lines.append(f" *   {domain.name}: {names}")
    lines.append(f" *   plan ids (interned): {', '.join(str(i) for i in layout.ids)}")
    lines.append(" */")
    lines.append("")
    for slot in layout.slots:
        if len(set(slot.initial)) != 1:  # Promela initialises an array with one value
            raise TranslationError(
                f"Promela: the initial state's {slot.name} is not uniform ({slot.initial})"
            )
        size = "" if slot.count == 1 else f"[{slot.count}]"
        lines.append(f"{slot.type} {slot.name}{size} = {slot.initial[0]};")
    lines.append("")
    lines.append("/* scratch, never part of a state: the state before the call, temps, flags */")
    for slot in layout.slots:
        typed = "int" if slot.type == "short" else "byte"
        suffix = "" if slot.count == 1 else f"[{slot.count}]"
        lines.append(f"hidden {typed} b_{slot.name}{suffix};")
    if temps:
        lines.append("hidden int " + ", ".join(f"t{i}" for i in range(temps)) + ";")
    lines.append("hidden int call;")
    lines.append("hidden byte answer, int_range, changed;")
    lines.append("hidden byte " + ", ".join(_flag(n) for n in checked) + ";")
    lines.append("")
    lines.append("active proctype env()")
    lines.append("{")
    lines.append("  do")
    lines.extend(blocks)
    lines.append("  od")
    lines.append("}")
    return "\n".join(lines) + "\n"
