"""The checkpoint every paid job goes through (generation and labelling share it)."""

from __future__ import annotations

from rag_experiments.golden import llm_jobs


def test_checkpoint_tolerates_a_torn_last_line(tmp_path):
    cp = llm_jobs.Checkpoint(tmp_path / "x.log.jsonl")
    cp.append({"event": "item", "key": "a", "status": "done"})
    with open(cp.path, "a") as fh:
        fh.write('{"event": "item", "key": "b", "sta')  # killed mid-write
    assert [e["key"] for e in cp.entries()] == ["a"] and cp.torn_lines == 1
    cp.append({"event": "item", "key": "c", "status": "done"})
    assert [e["key"] for e in cp.entries()] == ["a", "c"]


def test_state_counts_an_unusable_answer_as_failed_until_a_usable_one_follows(tmp_path):
    cp = llm_jobs.Checkpoint(tmp_path / "x.log.jsonl")
    cp.append({"event": "item", "key": "a", "status": "done", "unusable": True})
    cp.append({"event": "item", "key": "b", "status": "api_error"})
    state = llm_jobs.read_state(cp)
    assert state.done == {"a"} and state.failed == {"a"}
    cp.append({"event": "item", "key": "a", "status": "done"})
    state = llm_jobs.read_state(cp)
    assert state.done == {"a"} and state.failed == frozenset()
    jobs = [llm_jobs.Job(k, "p", {}) for k in "abc"]
    assert [j.key for j in llm_jobs.pending_jobs(jobs, state, retry_failed=False)] == ["b", "c"]


def test_a_batch_is_open_until_collected(tmp_path):
    cp = llm_jobs.Checkpoint(tmp_path / "x.log.jsonl")
    cp.append({"event": "batch_submitted", "batch_id": "b1", "items": {"k1": {"key": "x", "payload": {}}}})
    assert llm_jobs.jobs_in_open_batches(llm_jobs.read_state(cp)) == {"x"}
    cp.append({"event": "batch_collected", "batch_id": "b1"})
    assert llm_jobs.jobs_in_open_batches(llm_jobs.read_state(cp)) == set()
