"""A parse kept between two reads of a growing log (``trainsweep.logs.resume``) and resumed on the rest
gives the run a parse of the whole log gives, whatever the cut: every dialect, cuts inside lines."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from trainsweep.logs import resume

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
LOGS = [
    "real-data/cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker/logs/result-p3-4-256-e1.txt",
    "real-data/cloud-ML/cnn-mnist/mnist-logs/p3.2xlarge/result-1-256-e1.out",
    "real-data/cloud-ML/resnet50-cifar/experimental-results/2020-08-CIFAR-on-sagemaker/logs/result-p3-1-256-e0.txt",
    "real-data/high-res-distributed/mo833-trabalho/experiment_results/c5x/"
    "TEST_NODE-TEST_EXPERIMENT_ID-1625080072.599054.out",
    "mlperf-training-v4.0/Dell/results/XE9680x8H100-SXM-80GB/llama2_70b_lora/result_0.txt",
]
RUN = "demo-20260101-000000-p3-1-256-e1"


def _whole(data: bytes) -> dict:
    session = resume.start(RUN, None)
    if data:
        session.feed(data)
    return session.finish(sha256="h").to_record()


@pytest.mark.parametrize("log", LOGS, ids=lambda p: Path(p).name)
def test_a_resumed_parse_is_the_whole_parse_at_every_version(log):
    data = (FIXTURES / log).read_bytes()
    cuts = sorted({len(data) * k // 7 + k for k in range(1, 7)} | {len(data)})
    state, done = None, 0
    for cut in cuts:
        if state is None:
            session = resume.start(RUN, None)
        else:
            loaded, why = resume.load(state, RUN, None)
            assert loaded is not None, why
            assert loaded.offset == done and loaded.tail_matches(data[done - loaded.tail_len : done])
            session = loaded.session
        session.feed(data[done:cut])
        state = resume.dump(session, data[max(0, cut - resume.TAIL) : cut], RUN, None)
        assert session.finish(sha256="h").to_record() == _whole(data[:cut]), f"cut at {cut}"
        done = cut


def test_a_state_of_other_parsing_code_is_refused(monkeypatch):
    session = resume.start(RUN, None)
    session.feed(b"Epoch 1/2\n1 step training time: 0.5s\n")
    state = resume.dump(session, b"", RUN, None)
    monkeypatch.setattr(resume, "PARSER_FINGERPRINT", "0" * 16)
    loaded, why = resume.load(state, RUN, None)
    assert loaded is None and "another version of the parser" in why


def test_a_state_naming_anything_but_the_parsers_classes_is_refused_unbuilt(tmp_path):
    class Touch:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (Path.touch, (tmp_path / "ran",))

    header = resume.dump(resume.start(RUN, None), b"", RUN, None).partition(b"\n")[0]
    loaded, why = resume.load(header + b"\n" + pickle.dumps(Touch()), RUN, None)
    assert loaded is None and "does not hold pathlib" in why
    assert not (tmp_path / "ran").exists()


def test_a_session_that_hashes_the_log_is_not_kept():
    from trainsweep.logs.parser import LogParse

    with pytest.raises(TypeError, match="hash_bytes=False"):
        pickle.dumps(LogParse("run"))
