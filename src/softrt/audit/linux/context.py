"""The facts every check shares, read once per audit (audit layer).

Reading /proc/*/task for every thread and /proc/irq for every IRQ is the expensive part of an
audit; ``Context`` reads each source lazily and keeps it, so several checks can use it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property

from ...cpus import CpuSet
from ...platform.linux import kfacts, ktasks
from ...schema.audit import LiveSample
from . import irqs as _irqs
from . import systemd


class Context:
    """One audit: the root to read, the real-time CPUs and the shared facts."""

    def __init__(self, root: str, rt_cpus: CpuSet, online: CpuSet) -> None:
        self.root = str(root)
        self.rt_cpus = rt_cpus
        self.online = online
        self.housekeeping = online - rt_cpus
        self.sample: LiveSample | None = None  # the live sample's result, set by the runner when taken

    @property
    def live(self) -> bool:
        """True when reading this machine (root "/"), not a captured tree."""
        return os.path.realpath(self.root) == "/"

    @property
    def own_pid(self) -> int | None:
        """This process's pid when auditing the live machine (it floats, by design)."""
        return os.getpid() if self.live else None

    @cached_property
    def own_lineage(self) -> list[int]:
        """softrt and the processes that started it (the shell, its terminal or sshd), init left out.

        They float on purpose: ``softrt tune`` moving the calling shell off the RT CPUs would make
        the next ``softrt run`` from that shell unable to use them (issue 12).
        """
        return ktasks.lineage(self.root, self.own_pid) if self.own_pid else []

    def text(self, rel: str) -> str | None:
        """Return the stripped text of a kernel file, or None."""
        return kfacts.text(self.root, rel)

    @cached_property
    def cmdline(self) -> Mapping[str, str] | None:
        """Kernel parameters (/proc/cmdline), read once and shared by the checks: read-only."""
        return kfacts.cmdline(self.root)

    @cached_property
    def kconfig(self) -> tuple[dict[str, str], str] | None:
        """(build configuration, where it was read) or None."""
        return kfacts.kconfig(self.root)

    def config(self, option: str) -> str | None:
        """Return a CONFIG_ option's value ("y", "250", …); None when unset or unknown."""
        return self.kconfig[0].get(option) if self.kconfig else None

    @cached_property
    def tasks(self) -> list[ktasks.Task]:
        """Every thread on the machine."""
        return ktasks.tasks(self.root)

    @cached_property
    def process_names(self) -> Mapping[str, list[int]]:
        """``{comm: [pid, …]}`` of user processes, read once and shared by the checks: read-only."""
        return ktasks.process_names(self.root)

    @cached_property
    def irqs(self) -> list[_irqs.Irq]:
        """Every device IRQ."""
        return _irqs.irqs(self.root)

    @cached_property
    def systemd_running(self) -> bool:
        """True when systemd is the running init."""
        return systemd.running(self.root)

    @cached_property
    def enabled_units(self) -> set[str]:
        """Enabled, unmasked systemd units."""
        return systemd.enabled_units(self.root)

    def describe_cpus(self, cpus: CpuSet) -> str:
        """``CPU 1`` or ``CPUs 2-3``."""
        return f"CPU {cpus}" if len(cpus) == 1 else f"CPUs {cpus}"
