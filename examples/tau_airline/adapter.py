"""The τ-bench airline agent's adapter (``replan.controller.adapter.Adapter``): what the
airline tools' results and the conversation make known, and whether a write is
confirmed, by the agent's written policy (τ-bench ``wiki.md``, the system prompt).

Evidence comes from trusted tool results and the user's words only. The assistant's
text counts as nothing but the *listing* a user's yes answers (an agent saying "you
have insurance" proves nothing); τ-bench drops the text of a message that carries a
tool call, so the host passes only text-only assistant messages.

Facts, per resource (``key@id``, the id being a reservation id or a user id):

- ``user_known@user``: the user typed the id, or ``get_user_details`` read it;
- ``reservation_known@reservation``: a tool result holds the reservation's record and
  its owner's id is known (``ids-before-change``);
- ``cancellable@reservation``: the latest record makes it cancellable under the written
  policy, strictly: booked within 24 h of the policy's clock, a flight of it shown
  cancelled by a tool result, business cabin, or insurance together with a health or
  weather reason the user gave (``cancel-eligibility``);
- ``flights_changeable@reservation``: its cabin is not basic economy
  (``no-basic-economy-flight-change``).

And ``news``, the run learning something: a read whose content differs from what the
same call returned before, a completed write, or a user message. Its state alternates,
so each is a change of state, which the contract counts as progress; a read repeating
its earlier content renumbers it, which the contract counts as no progress.

``update_reservation_flights`` is two steps: ``change_cabin`` when the call keeps the
reservation's flights, ``change_flights`` when it changes them (basic economy may do
the first only).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from replan.controller.adapter import Rule, Verdict
from replan.controller.records import EvidenceState, Observation

#: The written policy's clock: "The current time is 2024-05-15 15:00:00 EST."
#: (``created_at`` carries no zone; like the clock it reads as EST.)
NOW = datetime(2024, 5, 15, 15, 0, 0)

WRITE_TOOLS = frozenset(
    {
        "book_reservation",
        "cancel_reservation",
        "update_reservation_flights",
        "update_reservation_baggages",
        "update_reservation_passengers",
        "send_certificate",
    }
)
READ_TOOLS = frozenset(
    {
        "get_user_details",
        "get_reservation_details",
        "search_direct_flight",
        "search_onestop_flight",
        "list_all_airports",
        "calculate",
    }
)
#: Tools that make nothing known: ``think`` echoes the model's own thought, and the
#: transfer ends the run.
SILENT_TOOLS = frozenset({"think", "transfer_to_human_agents"})
#: A step that is not its tool's name.
TOOL_OF_STEP = {
    "change_cabin": "update_reservation_flights",
    "change_flights": "update_reservation_flights",
}

RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "confirm-before-write",
            "Before taking any actions that update the booking database (booking, "
            "modifying flights, editing baggage, upgrading cabin class, or updating "
            "passenger information), you must list the action details and obtain "
            "explicit user confirmation (yes) to proceed.",
        ),
        Rule(
            "ids-before-change",
            "Modify flight: The agent must first obtain the user id and the reservation "
            "id. / Cancel flight: The agent must first obtain the user id, the "
            "reservation id, and the reason for cancellation.",
        ),
        Rule(
            "user-id-first",
            "Book flight: The agent must first obtain the user id, then ask for the trip "
            "type, origin, destination.",
        ),
        Rule(
            "cancel-eligibility",
            "All reservations can be cancelled within 24 hours of booking, or if the "
            "airline cancelled the flight. Otherwise, basic economy or economy flights "
            "can be cancelled only if travel insurance is bought and the condition is "
            "met, and business flights can always be cancelled. (Travel insurance: "
            "enables full refund if the user needs to cancel the flight given health or "
            "weather reasons.)",
        ),
        Rule(
            "no-basic-economy-flight-change",
            "Change flights: Basic economy flights cannot be modified. (Change cabin: all "
            "reservations, including basic economy, can change cabin without changing "
            "the flights.)",
        ),
        Rule(
            "no-progress",
            "(replan contract) The same facts read again and again are no progress: the "
            "run stops (NoNewEvidence).",
        ),
        Rule(
            "guard",
            "(replan) A call the guard cannot place: no free resource slot, or no "
            "resource argument.",
        ),
    )
}

# ---- the user's words -----------------------------------------------------------------

# An explicit confirmation: a yes-word or an explicit instruction to carry out. Choosing
# an option ("I'll go with option 1") or asking for something new is not a yes.
_AFFIRM = re.compile(
    r"\b(yes|yeah|yep|yup|confirm(?:ed|s)?|i confirm|go ahead|proceed|please do|do it|"
    r"sure|ok(?:ay)?|absolutely|definitely|correct|that'?s right|sounds good|looks good|"
    r"oui)\b",
    re.I,
)
# A refusal or hold wins over any yes-word in the same message.
_NEGATE = re.compile(
    r"(^\s*(no|nope|nah|not yet|wait|hold on)\b)|"
    r"\b(don'?t|do not|never|not)\s+(\w+\s+){0,2}?"
    r"(proceed|go ahead|confirm|book|cancel|change|do)\b|"
    r"\b(hold off|not sure|let me think|not (?:correct|right)|incorrect|wrong)\b",
    re.I,
)
_HEALTH = (
    r"not feeling well|feeling poorly|health|sick|sickness|ill|illness|unwell|not well|"
    r"medical|hospital\w*|doctor|injur\w*|surgery|disease|covid|flu|fever"
)
_WEATHER = r"weather|storm\w*|hurricane|typhoon|blizzard|snow\w*|flood\w*|tornado|cyclone"
_COVERED = re.compile(rf"\b({_HEALTH}|{_WEATHER})\b", re.I)
_NEG_COVERED = re.compile(rf"\b(not|n't|no)\s+(\w+\s+){{0,2}}?({_HEALTH}|{_WEATHER})\b", re.I)
_USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{3,5}\b")
_NUMBER_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
)


def affirmative(text: str) -> bool:
    """An explicit yes with no refusal or hold in the same message."""
    return bool(_AFFIRM.search(text)) and not _NEGATE.search(text)


def covered_reason(texts: Iterable[str]) -> str | None:
    """The first health or weather reason the user gave (negations excluded)."""
    for text in texts:
        found = _COVERED.search(text)
        if found and not _NEG_COVERED.search(text):
            return found.group(0)
    return None


def mentions(text: str, token: object) -> bool:
    word = str(token).strip()
    if not word or token is None:
        return False
    pattern = r"(?<![A-Za-z0-9])" + re.escape(word) + r"(?![A-Za-z0-9])"
    return re.search(pattern, text, re.I) is not None


def mentions_number(text: str, value: object) -> bool:
    try:
        number = round(float(str(value)))
    except ValueError:
        return False
    if mentions(text, str(number)) or mentions(text, f"{number:,}"):
        return True
    return 0 <= number < len(_NUMBER_WORDS) and mentions(text, _NUMBER_WORDS[number])


def _flights(items: object) -> set[tuple[object, object]]:
    if not isinstance(items, list):
        return set()
    return {(f.get("flight_number"), f.get("date")) for f in items if isinstance(f, dict)}


@dataclass
class _Write:
    at: int  # the event number of the call
    yes: int  # the event number of the user's yes it ran on
    start: int  # where its listing window started
    signature: str


@dataclass
class AirlineAdapter:
    """One run's adapter: the facts it has read, the conversation, the writes done."""

    now: datetime = NOW
    rules: Mapping[str, Rule] = field(default_factory=lambda: RULES)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    stated_user_ids: set[str] = field(default_factory=set)
    reservations: dict[str, dict[str, Any]] = field(default_factory=dict)
    flight_status: dict[tuple[object, object], object] = field(default_factory=dict)
    user_texts: list[tuple[int, str]] = field(default_factory=list)
    assistant_texts: list[tuple[int, str]] = field(default_factory=list)
    done_writes: list[_Write] = field(default_factory=list)
    _read: dict[str, str] = field(default_factory=dict)  # call signature -> content
    _emitted: dict[str, EvidenceState] = field(default_factory=dict)
    _versions: dict[str, int] = field(default_factory=dict)
    _event: int = 0
    _approved: _Write | None = None

    # ---- Adapter --------------------------------------------------------------------

    def step_of(self, tool: str, arguments: Mapping[str, Any]) -> str:
        if tool != "update_reservation_flights":
            return tool
        record = self.reservations.get(str(arguments.get("reservation_id")))
        if record is not None and _flights(arguments.get("flights")) == _flights(
            record.get("flights")
        ):
            return "change_cabin"
        return "change_flights"

    def observe_message(self, role: str, text: str) -> list[Observation]:
        self._event += 1
        if role == "assistant":
            self.assistant_texts.append((self._event, text))
            return []
        self.user_texts.append((self._event, text))
        self.stated_user_ids.update(_USER_ID.findall(text))
        return [*self._derived(), self._news(new=True)]

    def observe_result(
        self, tool: str, arguments: Mapping[str, Any], result: str
    ) -> list[Observation]:
        self._event += 1
        if tool in SILENT_TOOLS:
            return []
        failed = result.lstrip().lower().startswith("error")
        new = True
        if tool not in WRITE_TOOLS or failed:
            signature = json.dumps([tool, arguments], sort_keys=True, default=str)
            new = self._read.get(signature) != result
            self._read[signature] = result
        elif self._approved is not None:
            self.done_writes.append(self._approved)  # a completed write closes its listing
        self._approved = None
        try:
            found = json.loads(result)
        except ValueError:
            found = None
        if tool == "get_user_details" and isinstance(found, dict):
            self.users[str(arguments.get("user_id"))] = found
        if isinstance(found, dict) and "reservation_id" in found and "cabin" in found:
            self.reservations[str(found["reservation_id"])] = found
        self._collect_status(found)
        return [*self._derived(), self._news(new=new)]

    def approve(self, step: str, arguments: Mapping[str, Any]) -> Verdict:
        self._event += 1
        tool = TOOL_OF_STEP.get(step, step)
        problem = self._confirmation(tool, dict(arguments))
        if problem is not None:
            return Verdict(False, "confirm-before-write", problem)
        return Verdict(True, "confirm-before-write", "listed, then confirmed by the user")

    def explain(self, key: str, resource: str | None) -> tuple[str, str]:
        name = str(resource)
        if key == "user_known":
            return "user-id-first", f"user id {name!r} neither given by the user nor read"
        record = self.reservations.get(name)
        if key == "reservation_known":
            if record is None:
                return (
                    "ids-before-change",
                    f"reservation {name!r} not obtained from any tool result before the change",
                )
            return (
                "ids-before-change",
                f"owner {record.get('user_id')!r} of {name} neither given by the user nor read",
            )
        if key == "flights_changeable":
            return (
                "no-basic-economy-flight-change",
                f"reservation {name} is basic_economy (latest trusted record): "
                "its flights cannot change",
            )
        if key == "cancellable":
            return "cancel-eligibility", f"{name}: " + "; ".join(self._not_cancellable(record))
        return "guard", f"{key} is not Passed"

    def explain_stop(self, reason: str) -> tuple[str, str]:
        if reason == "NoNewEvidence":
            return "no-progress", "the same facts were read again and again (no new evidence)"
        return "guard", f"the run stopped: {reason}"

    # ---- facts ------------------------------------------------------------------------

    def _observation(self, key: str, state: EvidenceState) -> Observation:
        version = self._versions.get(key, 0) + 1
        self._versions[key] = version
        self._emitted[key] = state
        return Observation(key, version, state, "tau-airline")

    def _news(self, *, new: bool) -> Observation:
        last = self._emitted.get("news")
        if new:
            state = EvidenceState.FAILED if last is EvidenceState.PASSED else EvidenceState.PASSED
        else:
            state = last or EvidenceState.PASSED
        return self._observation("news", state)

    def _derived(self) -> list[Observation]:
        """An observation for every per-resource fact whose state changed."""
        facts: dict[str, EvidenceState] = {}
        known_users = set(self.users) | self.stated_user_ids
        for user in known_users:
            facts[f"user_known@{user}"] = EvidenceState.PASSED
        for rid, record in self.reservations.items():
            owner_known = record.get("user_id") in known_users
            facts[f"reservation_known@{rid}"] = (
                EvidenceState.PASSED if owner_known else EvidenceState.UNKNOWN
            )
            facts[f"cancellable@{rid}"] = (
                EvidenceState.FAILED if self._not_cancellable(record) else EvidenceState.PASSED
            )
            facts[f"flights_changeable@{rid}"] = (
                EvidenceState.FAILED
                if record.get("cabin") == "basic_economy"
                else EvidenceState.PASSED
            )
        return [
            self._observation(key, state)
            for key, state in sorted(facts.items())
            if self._emitted.get(key, EvidenceState.UNKNOWN) is not state
        ]

    def _collect_status(self, found: object) -> None:
        """Any trusted record of a flight on a date with a status."""
        if isinstance(found, list):
            for item in found:
                self._collect_status(item)
        elif isinstance(found, dict):
            if "flight_number" in found and "date" in found and "status" in found:
                self.flight_status[(found["flight_number"], found["date"])] = found["status"]
            dates = found.get("dates")
            if "flight_number" in found and isinstance(dates, dict):
                for date, value in dates.items():
                    if isinstance(value, dict) and "status" in value:
                        self.flight_status[(found["flight_number"], date)] = value["status"]

    def _not_cancellable(self, record: Mapping[str, Any] | None) -> list[str]:
        """Why the reservation is not cancellable by the written policy ([]: it is)."""
        if record is None:
            return ["no trusted record of the reservation"]
        why = []
        try:
            created: datetime | None = datetime.fromisoformat(str(record.get("created_at", "")))
        except ValueError:
            created = None
        if created is not None and self.now - timedelta(hours=24) <= created <= self.now:
            return []
        why.append(
            f"created_at {record.get('created_at')} is more than 24 h before "
            f"{self.now:%Y-%m-%d %H:%M}"
        )
        segments = _flights(record.get("flights"))
        if any(self.flight_status.get(segment) == "cancelled" for segment in segments):
            return []
        why.append("no tool result shows a flight of it cancelled")
        cabin = record.get("cabin")
        if cabin == "business":
            return []
        why.append(f"cabin is {cabin}")
        if record.get("insurance") == "yes":
            if covered_reason(text for _, text in self.user_texts):
                return []
            why.append("insurance yes but the user gave no health or weather reason")
        else:
            why.append(f"insurance is {record.get('insurance')!r}")
        return why

    # ---- the confirmation ----------------------------------------------------------------

    def _details(self, tool: str, arguments: dict[str, Any]) -> list[tuple[str, list[object]]]:
        """Groups of tokens; the listing the user said yes to names one of each group:
        the resource, and what the call changes."""
        groups: list[tuple[str, list[object]]] = []
        rid = arguments.get("reservation_id")
        record = self.reservations.get(str(rid), {})
        if tool in (
            "cancel_reservation",
            "update_reservation_flights",
            "update_reservation_baggages",
            "update_reservation_passengers",
        ):
            ident = {rid} | {f for f, _ in _flights(record.get("flights"))}
            groups.append((f"reservation {rid}", sorted(str(x) for x in ident if x)))
        if tool == "update_reservation_flights":
            current = _flights(record.get("flights"))
            for flight in arguments.get("flights") or []:
                if (
                    isinstance(flight, dict)
                    and (flight.get("flight_number"), flight.get("date")) not in current
                ):
                    groups.append(("new flight", [flight.get("flight_number")]))
            if not record or arguments.get("cabin") != record.get("cabin"):
                cabin = str(arguments.get("cabin", ""))
                groups.append(("cabin", [cabin.replace("_", " "), cabin]))
        elif tool == "update_reservation_baggages":
            total, current_total = arguments.get("total_baggages"), record.get("total_baggages")
            numbers = [total] + (
                [total - current_total]
                if isinstance(total, int) and isinstance(current_total, int)
                else []
            )
            groups.append(("bags", ["#" + str(n) for n in numbers]))
        elif tool == "update_reservation_passengers":
            current = [
                (p.get("first_name"), p.get("last_name"), p.get("dob"))
                for p in record.get("passengers", [])
            ]
            for person in arguments.get("passengers") or []:
                if (
                    isinstance(person, dict)
                    and (person.get("first_name"), person.get("last_name"), person.get("dob"))
                    not in current
                ):
                    groups.append(
                        ("passenger", [person.get("first_name"), person.get("last_name")])
                    )
        elif tool == "book_reservation":
            for flight in arguments.get("flights") or []:
                if isinstance(flight, dict):
                    groups.append(("flight", [flight.get("flight_number")]))
            cabin = str(arguments.get("cabin", ""))
            groups.append(("cabin", [cabin.replace("_", " "), cabin]))
        elif tool == "send_certificate":
            groups.append(("amount", ["#" + str(arguments.get("amount"))]))
        return groups

    def _confirmation(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """Why the call is not confirmed (None: it is). The last user message is an
        explicit yes, answering an assistant turn with text; the call's details were
        listed since the last completed write (a write sharing its yes with the one
        before shares that one's listing); one yes runs an identical write once."""
        at = self._event
        if not self.user_texts:
            return "no user message before the write"
        yes_at, yes = self.user_texts[-1]
        before = self.user_texts[-2][0] if len(self.user_texts) > 1 else -1
        if not affirmative(yes):
            return f"last user message before the write is not an explicit yes: {yes[:90]!r}"
        turn = "\n".join(t for j, t in self.assistant_texts if before < j < yes_at)
        if not turn.strip():
            return "the user's yes answered no assistant message (nothing was listed)"
        signature = json.dumps([tool, arguments], sort_keys=True, default=str)
        if any(w.yes == yes_at and w.signature == signature for w in self.done_writes):
            return (
                "this yes already authorised an identical write that completed "
                "(one yes, one execution)"
            )
        start = -1
        if self.done_writes:
            last = self.done_writes[-1]
            start = last.start if last.yes == yes_at else last.at
        listed = "\n".join(t for j, t in self.assistant_texts if start < j < yes_at)
        said = "\n".join(
            t for j, t in sorted(self.assistant_texts + self.user_texts) if start < j <= yes_at
        )
        missing = []
        for label, tokens in self._details(tool, arguments):
            text = said if label.startswith("reservation ") else listed
            if not any(
                mentions_number(text, token[1:])
                if isinstance(token, str) and token.startswith("#")
                else mentions(text, token)
                for token in tokens
                if token is not None
            ):
                missing.append(f"{label} {tokens}")
        if missing:
            return "details of this call never listed before the yes: " + "; ".join(missing)
        self._approved = _Write(at, yes_at, start, signature)
        return None


def new_adapter() -> AirlineAdapter:
    """A fresh adapter for one run (``replan check-trace --adapter`` calls this)."""
    return AirlineAdapter()
