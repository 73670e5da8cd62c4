"""Generated kernels kept between runs (``verification/translate/kernel_cache.py``): a
kept kernel is the kernel that generating it again gives, an entry that is not sound
is generated again, and only the inputs a kernel was generated from find it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import small_domains

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY
from replan.verification.core.search import SearchResult
from replan.verification.core.subject import PROJECT
from replan.verification.engines.kernel import explore_kernel
from replan.verification.subjects.mutants import MUTANTS
from replan.verification.translate import kernel_cache
from replan.verification.translate.kernel_cache import (
    ENVIRONMENT,
    GENERATOR_SOURCES,
    KernelCache,
    cache_key,
    generator_digest,
    package_root,
)

#: The smallest domain worth keeping: one key observed Passed, one step, one id.
TINY = dataclasses.replace(
    small_domains(),
    name="tiny",
    keys=DEFAULT_POLICY.keys[:1],
    evidence_states=("Passed",),
    steps=(DEFAULT_POLICY.steps[0].name,),
)


@pytest.fixture(scope="module")
def generating_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SearchResult]:
    """A cache holding the project's kernel over the tiny domain, and the search
    that generated it."""
    directory = tmp_path_factory.mktemp("kept")
    result = explore_kernel(DEFAULT_POLICY, TINY, PROJECT, cache=KernelCache(directory))
    assert result.details["kernel_cache"]["status"] == "generated"
    return directory, result


@pytest.fixture
def kept(generating_run: tuple[Path, SearchResult]) -> Path:
    return generating_run[0]


def _copy(kept: Path, tmp_path: Path) -> tuple[KernelCache, Path]:
    directory = tmp_path / "cache"
    shutil.copytree(kept, directory)
    [entry] = directory.iterdir()
    return KernelCache(directory), entry


def test_a_kept_kernel_is_reused_and_gives_what_generating_it_gives(
    generating_run: tuple[Path, SearchResult], tmp_path: Path
) -> None:
    """The reused kernel is the text the generating run searched, and its search
    finds what a kernel generated afresh finds."""
    kept, generated = generating_run
    cache, entry = _copy(kept, tmp_path)
    reused = explore_kernel(DEFAULT_POLICY, TINY, PROJECT, cache=cache)
    assert reused.details["kernel_cache"] == {"status": "reused", "path": str(entry)}
    assert reused.details["kernel_digest"] == generated.details["kernel_digest"]
    assert reused.artifact == generated.artifact
    fresh = explore_kernel(DEFAULT_POLICY, TINY, PROJECT)
    assert fresh.details["kernel_cache"] == {"status": "off"}
    figures = ("states", "transitions", "depth", "ok", "complete")
    assert [getattr(reused, f) for f in figures] == [getattr(fresh, f) for f in figures]
    assert any("the kernel kept at" in line for line in reused.lines())


def test_another_policy_or_domain_finds_no_kept_kernel(kept: Path) -> None:
    key = cache_key(DEFAULT_POLICY, TINY, PROJECT.model)
    assert KernelCache(kept).path(key).exists()
    other_policy = dataclasses.replace(DEFAULT_POLICY, max_steps=DEFAULT_POLICY.max_steps + 1)
    other_domains = dataclasses.replace(TINY, versions=2)
    assert cache_key(other_policy, TINY, PROJECT.model) != key
    assert cache_key(DEFAULT_POLICY, other_domains, PROJECT.model) != key


def test_an_edit_to_the_generators_source_changes_the_key(tmp_path: Path) -> None:
    """The key covers the bodies, the properties and the translator: a copy of the
    package digests as the package does until one of its files changes."""
    root = package_root()
    for package in GENERATOR_SOURCES:
        shutil.copytree(
            root / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    assert generator_digest(tmp_path) == generator_digest()
    run = tmp_path / "controller" / "run.py"
    run.write_text(run.read_text() + "\n# an edit\n")
    assert generator_digest.__wrapped__(tmp_path) != generator_digest()


def _truncated(document: str) -> str:
    return document[: len(document) // 2]


def _source_edited(document: str) -> str:
    entry = json.loads(document)
    entry["source"] = entry["source"].replace("return None", "return 'forged'", 1)
    return json.dumps(entry)


def _table_of_other_calls(document: str) -> str:
    entry = json.loads(document)
    entry["table"] = entry["table"][1:]  # one call accounted for nowhere
    return json.dumps(entry)


def _other_format(document: str) -> str:
    return json.dumps({**json.loads(document), "format": 0})


@pytest.mark.parametrize(
    "damage", [_truncated, _source_edited, _table_of_other_calls, _other_format]
)
def test_an_unsound_entry_is_generated_again_never_trusted(
    kept: Path, tmp_path: Path, damage: object
) -> None:
    cache, entry = _copy(kept, tmp_path)
    entry.write_text(damage(entry.read_text()))  # type: ignore[operator]
    result = explore_kernel(DEFAULT_POLICY, TINY, PROJECT, cache=cache)
    provenance = result.details["kernel_cache"]
    assert provenance["status"] == "regenerated" and "unsound" in provenance["why"]
    assert result.ok and result.complete
    # and what was written again is sound: the kernel that run searched
    key = cache_key(DEFAULT_POLICY, TINY, PROJECT.model)
    again = cache.load(key)
    assert again is not None and again.digest == result.details["kernel_digest"]


def test_only_the_most_recently_used_entries_are_kept(
    kept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel_cache, "KEPT_ENTRIES", 3)
    cache, entry = _copy(kept, tmp_path)
    key = entry.stem
    generated = cache.load(key)
    assert generated is not None
    for age, other in enumerate(("a" * 64, "b" * 64, "c" * 64), start=1):
        cache.store(other, generated)
        os.utime(cache.path(other), (1000.0 * age, 1000.0 * age))  # used long ago
    assert cache.load(key) is not None  # used now: the last to go
    cache.store("d" * 64, generated)
    kept_now = {path.stem for path in cache.directory.iterdir()}
    assert kept_now == {key, "c" * 64, "d" * 64}


def test_a_mutants_kernel_is_never_kept(tmp_path: Path) -> None:
    """Only the project's bodies are covered by the key: a broken body is generated
    every time, and still found."""
    cache = KernelCache(tmp_path / "cache")
    result = explore_kernel(DEFAULT_POLICY, TINY, MUTANTS["stopped-run-revived"], cache=cache)
    assert result.details["kernel_cache"]["status"] == "not cached"
    assert not result.ok and not (tmp_path / "cache").exists()


def test_a_cache_that_cannot_be_written_only_costs_time(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    result = explore_kernel(DEFAULT_POLICY, TINY, PROJECT, cache=KernelCache(blocked))
    provenance = result.details["kernel_cache"]
    assert provenance["status"] == "generated" and provenance["why"].startswith("not kept")
    assert result.ok and result.complete


def test_the_command_keeps_its_kernels_where_the_environment_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The session's cache (tests/conftest.py names it in the environment): a second
    run reuses what the first kept there (another test of the session may have been
    that first run); --no-cache generates afresh and keeps nothing."""
    arguments = ["explore", "--engine", "kernel", "--spin-domains", "--json"]
    assert main(arguments) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(arguments) == 0
    second = json.loads(capsys.readouterr().out)
    assert first["kernel_cache"]["status"] in ("generated", "reused")
    assert second["kernel_cache"]["status"] == "reused"
    assert first["kernel_cache"]["path"] == second["kernel_cache"]["path"]
    assert Path(second["kernel_cache"]["path"]).parent == Path(os.environ[ENVIRONMENT])
    assert second["kernel_digest"] == first["kernel_digest"]
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path / "kernels"))
    assert main([*arguments, "--no-cache"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert fresh["kernel_cache"] == {"status": "off"}
    assert not (tmp_path / "kernels").exists()
    counts = ("states", "transitions", "depth", "ok")
    assert [second[c] for c in counts] == [first[c] for c in counts] == [fresh[c] for c in counts]


def test_no_cache_is_only_for_the_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--engine", "python", "--spin-domains", "--no-cache"]) == 2
    assert "--no-cache is not for --engine python" in capsys.readouterr().err
