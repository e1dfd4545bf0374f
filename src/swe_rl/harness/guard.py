"""The steering check of one grading: inventory before and after the patch, flags, and strict mode's
refusal or revert (the rule is :mod:`.steering`, the git mechanics :mod:`.inventory`)."""

from __future__ import annotations

from swe_rl.errors import SandboxError
from swe_rl.harness import inventory
from swe_rl.harness.inventory import GITLINK, SYMLINK, Change, Inventory
from swe_rl.harness.steering import (
    REFUSE,
    SteeringFile,
    SteeringRule,
    action_for,
    patch_path_rule,
    path_rule,
    shadow_names,
)
from swe_rl.harness.verdict import GradingMode
from swe_rl.sandbox.base import Sandbox
from swe_rl.tasks.model import Task

STEERING_MARK = ">>>>> swe-rl steering"


class Guard:
    """Call :meth:`before` once the candidate patch is written, :meth:`after` once it is applied.
    ``files`` is what breaks the rule; ``refusal`` (strict mode only) says why the tests must not run."""

    def __init__(self, task: Task, mode: GradingMode, installed: set[str] | None = None) -> None:
        self.task = task
        self.mode = mode
        self.installed = installed  # the env's module names, when the caller knows them
        self.files: list[SteeringFile] = []
        self.refusal: str | None = None
        self._inventory = Inventory()

    async def before(self, box: Sandbox, setup: str = "") -> None:
        """``setup``: shell run first, in the same command (it writes the candidate patch)."""
        self._inventory = await inventory.before(box, setup, self.installed)
        if self._inventory.problem and self.mode == "strict":
            # the tree is still pristine: the env or the sandbox is at fault, not the patch
            raise SandboxError(f"strict grading of {self.task.instance_id}: {self._inventory.problem}")
        for path in self._inventory.patch_paths:
            rule = patch_path_rule(path)
            if rule:
                self._add(path, rule)
        self._refuse_if_needed(None)

    async def after(self, box: Sandbox) -> None:
        found = await inventory.after(box, self._inventory)
        self._inventory = found
        if found.gitdir_changed:
            self._add(".git", "git_dir")
        for change, rule in self._classify(found.changes):
            self._add(change.path, rule)
        self._refuse_if_needed(found.problem)
        if self.mode == "strict" and not self.refusal:
            await self._revert(box)

    def kept_paths(self) -> list[str]:
        """The paths the patch changed that stay changed for the tests (none reverted)."""
        reverted = {f.path for f in self.files if f.action == "reverted"}
        return sorted({c.path for c in self._inventory.changes} - reverted)

    def log_lines(self) -> list[str]:
        lines = [f"{STEERING_MARK} ({self.mode}): {f.action} {f.rule} {f.path!r}" for f in self.files]
        if self.refusal:
            lines.append(f"{STEERING_MARK} ({self.mode}): patch refused: {self.refusal}")
        elif self._inventory.problem:
            lines.append(f"{STEERING_MARK} ({self.mode}): inventory incomplete: {self._inventory.problem}")
        return lines

    def _classify(self, changes: list[Change]) -> list[tuple[Change, SteeringRule]]:
        shadow = shadow_names(self._inventory.installed)
        test_files = set(self.task.test_files)
        found: list[tuple[Change, SteeringRule]] = []
        for change in changes:
            modes = (change.old_mode, change.new_mode)
            rule: SteeringRule | None
            if SYMLINK in modes:
                rule = "symlink"
            elif GITLINK in modes:
                rule = "nested_repo"
            else:
                rule = path_rule(
                    change.path,
                    test_files=test_files,
                    new=change.new,
                    package_dirs=self._inventory.package_dirs,
                    base_packages=self._inventory.base_packages,
                    shadow=shadow,
                )
            if rule:
                found.append((change, rule))
        return found

    def _add(self, path: str, rule: SteeringRule) -> None:
        if not any(f.path == path and f.rule == rule for f in self.files):
            self.files.append(SteeringFile(path=path, rule=rule, action=action_for(rule, self.mode)))

    def _refuse_if_needed(self, problem: str | None) -> None:
        if self.mode != "strict" or self.refusal:
            return
        refused = [f for f in self.files if f.rule in REFUSE]
        if refused:
            self.refusal = ", ".join(f"{f.rule} {f.path!r}" for f in refused)
        elif problem:
            self.refusal = problem

    async def _revert(self, box: Sandbox) -> None:
        paths = sorted({f.path for f in self.files if f.action == "reverted"})
        if not paths:
            return
        left = await inventory.revert(box, self._inventory, paths)
        if left is None:
            self.refusal = "cannot snapshot the tree after the revert"
            return
        still = [f"{rule} {change.path!r}" for change, rule in self._classify(left)]
        if still:
            self.refusal = f"the revert left {', '.join(still)}"
