"""What a campaign visited, in the form its comparison with the explorer reads, and
no more.

Why: the campaign used to keep every distinct snapshot it saw as its canonical JSON
text (and each visited transition as that text and a label), only so that the
explorer's coverage comparison could parse them back and map them onto its
abstraction (``explore.abstract_state``). A snapshot's text grows with the run (its
recorded contents, its plan ids), so the sets grew with every new state. Here each
distinct state is kept as a 16-byte fingerprint of that canonical text, mapped to its
abstract state, which is computed once and shared by every state that abstracts to
it. The comparison reads the same distinct states and the same distinct
(state, transition) pairs as before, so its figures are the same.

Owns: ``Visited`` (record a snapshot, record a transition from one, merge two
campaigns' records, hand the comparison its abstract states and pairs).

Leaves to others: the abstraction (``explore.abstract_state``), the comparison
(``explore.coverage``), when to record (``campaign``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from replan.controller.fields import state_of_snapshot
from replan.verification.core.abstraction import abstract_state

#: A distinct state: the BLAKE2b fingerprint of its canonical snapshot text. 128 bits
#: make a collision (two states counted as one) vanishingly unlikely at any campaign's
#: size (below 1e-20 at a billion states).
Fingerprint = bytes


def canonical_snapshot(snapshot: Mapping[str, Any]) -> str:
    """A snapshot as one canonical string: the identity of a concrete state."""
    return json.dumps(snapshot, sort_keys=True, separators=(",", ":"))


def fingerprint(snapshot: Mapping[str, Any]) -> Fingerprint:
    """The fingerprint of ``snapshot``'s canonical text."""
    return hashlib.blake2b(canonical_snapshot(snapshot).encode(), digest_size=16).digest()


class Visited:
    """The distinct states (fingerprint -> abstract state) and the distinct
    (state, declared transition label) pairs a campaign visited."""

    def __init__(self) -> None:
        self._abstract: dict[Fingerprint, tuple[Any, ...]] = {}
        self._transitions: set[tuple[Fingerprint, str]] = set()
        #: One object per distinct abstract state (and label): states share them.
        self._shared: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self._abstract)

    @property
    def transition_count(self) -> int:
        return len(self._transitions)

    def state(self, snapshot: Mapping[str, Any]) -> Fingerprint:
        """Record ``snapshot`` (a ``snapshot()`` dict); its fingerprint."""
        key = fingerprint(snapshot)
        if key not in self._abstract:
            mapped = abstract_state(state_of_snapshot(snapshot))
            self._abstract[key] = self._shared.setdefault(mapped, mapped)
        return key

    def transition(self, before: Fingerprint, label: str) -> None:
        """Record that ``label`` fired from the recorded state ``before``."""
        self._transitions.add((before, self._shared.setdefault(label, label)))

    def __contains__(self, snapshot: object) -> bool:
        return isinstance(snapshot, Mapping) and fingerprint(snapshot) in self._abstract

    def merge(self, other: Visited) -> None:
        """Add ``other``'s records to these."""
        for key, mapped in other._abstract.items():
            self._abstract.setdefault(key, self._shared.setdefault(mapped, mapped))
        for before, label in other._transitions:
            self.transition(before, label)

    def abstract_states(self) -> Iterator[tuple[Any, ...]]:
        """The abstract state of each distinct visited state (repeats included)."""
        return iter(self._abstract.values())

    def abstract_transitions(self) -> Iterator[tuple[tuple[Any, ...], str]]:
        """Each distinct visited (state, label) pair, the state as its abstract state."""
        return ((self._abstract[before], label) for before, label in self._transitions)


__all__ = ["Fingerprint", "Visited", "canonical_snapshot", "fingerprint"]
