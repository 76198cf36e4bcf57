"""The champion marked wherever it sits in MLflow's runs list, in the column a person reads first.

MLflow's runs list shows the run name first and cuts every column at ~18 characters; tag columns
come after the metrics, in MLflow's own order, often out of the first screen. So the mark goes in
the name (issue 59): the champion's run is renamed ``champion: <its name>`` and, when its value of
record was measured on an older golden version, says that first
(``champion (older golden d1895783, not rescored): …``) so a record value beside a sweep's numbers
is never read as like with like. A sweep parent that holds the champion folded among its points is
renamed ``champion inside: <its name>`` and tagged :data:`MARK` = ``holds the champion: <point>``.

The name a run had before is kept in the tag :data:`NAME_TAG`; when the champion moves, the runs
it marked get their names back (an experiment's list marks one champion and one parent).

The champion's run is also tagged :data:`MARK` = ``true`` and :data:`OF` = its model
(:func:`champion_tags`); :func:`hand_over` moves that tag: one run per model claims the title.
"""

from __future__ import annotations

#: the runs list's tag column (ui_links.CHAMPION_TAGS): ``true`` on the champion's run (promote and
#: the record's stand-in set it), ``holds the champion: <point>`` on the sweep parent that holds it
MARK = "champion"
HOLDS = "holds the champion: "
#: which registered model a champion's run is the champion of (tracking.history reads it)
OF = "champion_of"
#: on a run that was the champion: the run that replaced it
REPLACED_BY = "replaced_by"
#: the run's name before the mark (restored when the mark leaves it)
NAME_TAG = "champion.run_name"
PREFIX = "champion: "
INSIDE = "champion inside"
_MAX_NAME = 250


def champion_prefix(older: str | None = None) -> str:
    """``champion: `` for a champion measured on the newest golden version, else ``champion (<older>): ``
    (``older``: what makes its value of record not comparable, e.g. ``older golden d1895783, not rescored``)."""
    return f"champion ({older}): " if older else PREFIX


def parent_prefix(prefix: str) -> str:
    """The sweep parent's prefix for a champion's: ``champion inside: `` / ``champion inside (…): ``."""
    return prefix.replace("champion", INSIDE, 1)


def original_name(run) -> str:
    """The run's name before any mark (a record's stand-in is logged as ``champion: <retriever>``:
    that prefix is the mark's own, so it is not repeated)."""
    name = run.data.tags.get(NAME_TAG) or run.info.run_name or run.info.run_id[:8]
    return name.removeprefix(PREFIX)


def _rename(c, run, prefix: str) -> None:
    original = original_name(run)
    name = (prefix + original)[:_MAX_NAME]
    if NAME_TAG not in run.data.tags:
        c.set_tag(run.info.run_id, NAME_TAG, run.info.run_name or original)
    if run.info.run_name != name:
        c.update_run(run.info.run_id, name=name)


def _restore(c, run) -> None:
    """The run's name before the mark, and the mark's tags gone. A record's stand-in was logged as
    ``champion: <retriever>``: it becomes ``replaced champion: <retriever>`` (two rows named
    champion read as two champions)."""
    before = run.data.tags[NAME_TAG]
    c.update_run(run.info.run_id, name=f"replaced {before}" if before.startswith(PREFIX) else before)
    c.delete_tag(run.info.run_id, NAME_TAG)
    if run.data.tags.get(MARK, "").startswith(HOLDS):
        c.delete_tag(run.info.run_id, MARK)


def mark_champion(c, run_id: str, prefix: str = PREFIX) -> None:
    """Mark the champion's run (its name starts with ``prefix``: :func:`champion_prefix`) and, when it
    is a sweep point, its parent (name and :data:`MARK`); earlier marks in the experiment leave."""
    run = c.get_run(run_id)
    parent = run.data.tags.get("mlflow.parentRunId")
    experiment = [run.info.experiment_id]
    for old in c.search_runs(experiment, f"tags.`{NAME_TAG}` LIKE '%'", max_results=1000):
        if old.info.run_id not in (run_id, parent):
            _restore(c, old)
    for old in c.search_runs(experiment, f"tags.{MARK} LIKE '{HOLDS}%'", max_results=1000):
        if old.info.run_id != parent:
            c.delete_tag(old.info.run_id, MARK)
    if parent:
        holder = c.get_run(parent)
        value = f"{HOLDS}{original_name(run)}"[:_MAX_NAME]
        if holder.data.tags.get(MARK) != value:
            c.set_tag(parent, MARK, value)
        _rename(c, holder, parent_prefix(prefix))
    _rename(c, run, prefix)


def champion_tags(model: str) -> dict[str, str]:
    """The tags of ``model``'s champion run (a promoted run; a champion of record's stand-in is logged
    with them)."""
    return {MARK: "true", OF: model}


def hand_over(c, model: str, new_id: str, previous: str | None = None) -> None:
    """``new_id`` becomes ``model``'s champion run (:func:`champion_tags`); every other run tagged so
    says it is not any more (:data:`MARK` ``false``, :data:`REPLACED_BY` the new run), so one row
    claims the title: the previous champion and a champion of record's stand-in (the run that carries
    the record's model, not the record's run the registry names). ``previous``: the champion the
    registry named, handed over even without the :data:`OF` tag."""
    for key, value in champion_tags(model).items():
        c.set_tag(new_id, key, value)
    replaced = {previous} - {None, new_id}
    experiments = [e.experiment_id for e in c.search_experiments()]
    if experiments:
        query = f"tags.{MARK} = 'true' and tags.{OF} = '{model}'"
        replaced |= {r.info.run_id for r in c.search_runs(experiments, query, max_results=1000)} - {new_id}
    for run_id in sorted(replaced):
        c.set_tag(run_id, MARK, "false")
        c.set_tag(run_id, REPLACED_BY, new_id)
