"""Which stage outputs a mission still needs: the envelope carries an output only while a stage that may
still run reads it.

Every stage's output used to stay in the envelope to the end, so a pipeline of many distinct stages
re-decoded, re-encoded and re-diffed all of them at every stage: its cost per stage grew with its
length. A stage function declares what it reads (its parameters, missions.core.capability.stages) and
sees nothing else of the envelope, so an output no stage reachable from where the mission goes next
reads is dead: it leaves the envelope at that stage's commit. It stays readable where it was written:
in the checkpoints up to then (the API's and time travel's states), and a fork that resumes at an
earlier stage gets it back from there (missions.service.launcher).

Kept whatever the routing: the final stage's reads (a bound or a failure routes there from anywhere) and
its own output (the mission's result). Nothing is dropped while the mission waits for a person (the
next stage is not a stage: the answer may resume at the stage that asked, or at a configured one).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from missions.core.capability.stages import StageFunction
from missions.core.pipeline.config import PipelineConfig


class OutputLiveness:
    """The outputs a capability's mission may still read, by where it goes next."""

    def __init__(self, pipeline: PipelineConfig, stages: Mapping[str, StageFunction]):
        self._pipeline = pipeline
        final = pipeline.agent(pipeline.final)
        readers: dict[str, set[str]] = {}
        for name, function in stages.items():
            for read in function.reads:
                readers.setdefault(pipeline.agent(read).key, set()).add(name)
        self._always = {final.key, *(pipeline.agent(r).key for r in getattr(stages.get(final.name), "reads", {}))}
        self._readers = {key: frozenset(names) for key, names in readers.items()}
        # an answer may resume at a configured stage from any stage that asked
        resumed = [stage for stage in pipeline.resume.values() if stage]
        self._successors = {
            name: [
                *(s for target in pipeline.targets_of(name) for s in (pipeline.group_of(target) or [target])),
                *resumed,
            ]
            for name in pipeline.stage_names()
        }
        self._rank = _ranks(self._successors)
        # per (where next, output): the answer repeats for every pass of a loop
        self.live = lru_cache(maxsize=8192)(self._live)

    def dead(self, next_stage: str | None, keys: list[str]) -> list[str]:
        """The outputs among `keys` that no stage from `next_stage` on reads (none when it is not a stage)."""
        if next_stage is None or self._entry(next_stage) is None:
            return []
        return [key for key in keys if not self.live(next_stage, key)]

    def _entry(self, next_stage: str) -> list[str] | None:
        """The stages a mission routed to `next_stage` runs first (a group's name: its branches)."""
        group = self._pipeline.group_of(next_stage)
        if group is not None:
            return group
        return [next_stage] if next_stage in self._successors else None

    def _live(self, next_stage: str, key: str) -> bool:
        if key in self._always:
            return True
        readers = self._readers.get(key)
        if not readers:  # read by no stage: only the checkpoint keeps it
            return False
        # a stage reaches only stages of its rank or lower (ranks: _ranks), so a reader ranked above every
        # entry is behind the mission (a chain's stage before), and the walk skips what ranks below them all
        entry = self._entry(next_stage) or []
        lowest = min(self._rank[reader] for reader in readers)
        if lowest > max(self._rank[stage] for stage in entry):
            return False
        frontier = [stage for stage in entry if self._rank[stage] >= lowest]
        seen = set(frontier)
        while frontier:
            stage = frontier.pop()
            if stage in readers:
                return True
            for following in self._successors[stage]:
                if following not in seen and self._rank[following] >= lowest:
                    seen.add(following)
                    frontier.append(following)
        return False


def _ranks(successors: Mapping[str, list[str]]) -> dict[str, int]:
    """Each stage's strongly connected component, numbered in the order Tarjan's algorithm completes them:
    a component reaches only components completed before it, so along any route the rank never rises,
    and stages of one loop share one. Iterative: a pipeline may have thousands of stages."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    rank: dict[str, int] = {}
    completed = 0
    for root in successors:
        if root in index:
            continue
        work = [(root, iter(successors[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, following = work[-1]
            for target in following:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(successors[target])))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        rank[member] = completed
                        if member == node:
                            break
                    completed += 1
    return rank


__all__ = ["OutputLiveness"]
