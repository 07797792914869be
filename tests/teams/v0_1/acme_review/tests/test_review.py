"""ACME's review feature: Orion's step library (loaded by Orion's pytest plugin) and ACME's
own steps below."""

from __future__ import annotations

from pytest_bdd import parsers, scenarios, then, when

from orion.api import write_sessions
from orion.testing.world import World

scenarios("review.feature")


@then(parsers.re(r'the write of "(?P<path>[^"]+)" waits for the user\'s review'))
def write_waits_for_review(orion_world: World, path: str) -> None:
    [session] = [s for s in write_sessions(orion_world.runtime) if s.plan.relative == path]
    assert session.lifecycle.has_tag("review"), session.lifecycle.state
    assert session.result is None and not (orion_world.workspace / path).exists()
    assert any(f"{path} waits for your review" in notice
               for notice in orion_world.reporter.notices), orion_world.reporter.notices


@when("the user approves the write")
def user_approves(orion_world: World) -> None:
    orion_world.mark()
    orion_world.say("/approve")


@when("the user rejects the write")
def user_rejects(orion_world: World) -> None:
    orion_world.mark()
    orion_world.say("/reject")
