"""Where a streaming micro-batch's ``addBatch`` goes: the Spark jobs each batch of a query ran,
summed by phase, from the driver's status store (Spark keeps it whether or not the UI is on,
the last ``spark.ui.retainedJobs`` jobs).

A query's jobs carry its run id as their job group and ``batch = N`` in their description,
those its ``foreachBatch`` function starts from Python included. sparkcast names each phase
of its batches in the description (``sparkcast: broadcast rows``, ``sparkcast: the pattern``,
``sparkcast: sink ...``; ``execution/phases.py``); any other job is named by its call site
(Spark's own Kafka sink: ``start at ...``).
"""

from __future__ import annotations

import re
from pathlib import PurePath

from kafka_clients import rank

_BATCH = re.compile(r"batch = (\d+)")
_PHASE = re.compile(r"^sparkcast: (.+)$", re.MULTILINE)
_SITE = re.compile(r"^(\S+) at (.+?):(\d+)$")


def jobs_by_batch(spark, run_id: str) -> dict[int, dict[str, float]]:
    """``{batch id: {phase: milliseconds}}`` of the query run ``run_id``: each finished job's
    wall time, summed over the jobs of a batch in the same phase (sparkcast's name for it, else
    the job's call site)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    found: dict[int, dict[str, float]] = {}
    for index in range(jobs.size()):
        job = jobs.apply(index)
        group, description = job.jobGroup(), job.description()
        began, ended = job.submissionTime(), job.completionTime()
        if not (group.isDefined() and group.get() == run_id and description.isDefined()
                and began.isDefined() and ended.isDefined()):
            continue
        batch = _BATCH.search(description.get())
        if batch is None:
            continue
        named = _PHASE.search(description.get())
        site = named.group(1) if named else call_site(job.name())
        spent = found.setdefault(int(batch.group(1)), {})
        spent[site] = spent.get(site, 0.0) + ended.get().getTime() - began.get().getTime()
    return found


def call_site(name: str) -> str:
    """A job's name as a phase: ``collect at /long/path/streamed.py:138`` → ``collect at
    streamed.py:138`` (a name of another shape stays as it is)."""
    found = _SITE.match(name.strip())
    if found is None:
        return name.strip()
    action, path, line = found.groups()
    return f"{action} at {PurePath(path).name}:{line}"


def median_jobs(by_batch: dict[int, dict[str, float]], batches: list[int]) -> dict[str, float]:
    """Each phase's median milliseconds over ``batches`` (0 in a batch that ran none)."""
    sites = sorted({site for batch in batches for site in by_batch.get(batch, {})})
    return {site: rank(sorted(by_batch.get(batch, {}).get(site, 0.0) for batch in batches),
                       len(batches), 50) or 0.0 for site in sites}
