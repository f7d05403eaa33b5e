"""The MO833 per-rank dialect on small synthetic logs (the real ones are in test_logs_real_data.py)."""

from __future__ import annotations

from trainsweep.logs import parse


def test_interleaved_mo833_ranks_in_one_log_fill_every_rank() -> None:
    log = b"".join(
        [
            b"[MO833] Rank,1,Initialization Time: 2.5\n",
            b"[MO833] Rank,0,Initialization Time: 2.0\n",
            b"[MO833] Rank,0,Epoch,0,Iteration,0,It. time,1.5,Elapsed time,3.5\n",
            b"[MO833] Rank,1,Epoch,0,Iteration,0,It. time,1.25,Elapsed time,3.75\n",
            b"[MO833] Rank,1,Epoch,0,Epoch time,1.25,Elapsed time,3.8\n",
            b"[MO833] Rank,0,Epoch,0,Epoch time,1.5,Elapsed time,3.6\n",
        ]
    )
    run = parse(log)
    assert run.dialect == "mo833" and run.status == "complete"
    assert sorted(run.ranks) == [0, 1] and run.ranks[0] is run.epochs
    assert list(run.ranks[1][0].step_s) == [1.25] and run.ranks[1][0].epoch_s == 1.25
    assert (run.init_s, run.total_s, run.header.world_size) == (2.0, 3.6, 2)


def test_an_mo833_line_of_an_unknown_form_is_reported_and_skipped() -> None:
    log = b"[MO833] Rank,0,Epoch,0,Iteration,0,It. time,1.5,Elapsed time,3.5\n[MO833] Rank,0,Something else\n"
    run = parse(log)
    assert [(p.code, p.line) for p in run.problems] == [("bad-line", 2)]
    assert run.steps_total == 1
