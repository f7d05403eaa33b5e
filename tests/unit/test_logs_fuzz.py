"""Property tests: no input makes parse() raise, and how the input is chunked never changes the run."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trainsweep.logs import parse

FRAGMENTS = [
    b"Epoch 1/3",
    b"Epoch 2/3",
    b"Epoch 0/0",
    b"Epoch time: 1.5s",
    b"Epoch time: nan",
    b"1 step training time: 0.25s",
    b"2 step training time: -1",
    b"99999999999999999999 step training time: 1e999s",
    b"40 steps training: 2.5s",
    b"Validation time: 0.1",
    b"Real time: 1592371754.45",
    b"Real time: inf",
    b"('Tempo de inicializacao: ', 0.2)",
    b"Initialization time 3.86",
    b"Tempo do fit: 61.0",
    b"Duracao do treinamento:  61.3",
    b"Train on 60000 samples",
    b" - Tamanho do batch: 99999999999999999999999",
    b"  256/60000 [..............................] - ETA: 1s",
    b"60000/60000 [==============================] - 2s - val_accuracy: 0.9e-1",
    b"on_epoch_begin: 1.0s",
    b"on_epoch_end: 2.0s",
    b"python3 mnist_cnn.py --batch-size 0 --num-gpus 0 --epochs 0",
    b"Traceback (most recent call last):",
    b"ValueError: boom",
    b"[MO833] Rank,0,Initialization Time: 1.0",
    b"[MO833] Rank,0,Epoch,0,Iteration,0,It. time,1.0,Elapsed time,2.0",
    b"[MO833] Rank,1,Epoch,0,Epoch time,nan,Elapsed time,2.0",
    b"[MO833] Rank,x",
    b':::MLLOG {"key": "trainsweep.step", "value": {"step": 1, "step_s": 0.5}, "metadata": {"epoch_num": 0}}',
    b':::MLLOG {"key": "trainsweep.step", "value": {"step_s": "x"}, "metadata": {"rank": "a"}}',
    b':::MLLOG {"key": "eval_accuracy", "value": null, "metadata": {"epoch_num": 2}}',
    b':::MLLOG {"key": "global_batch_size", "value": [1], "metadata": []}',
    b':::MLLOG {"key": "trainsweep.failure", "value": 3}',
    b':::MLLOG {"key": "run_stop", "time_ms": 1e400, "metadata": {"status": "aborted"}}',
    b":::MLLOG [1, 2]",
    b":::MLLOG",
    b"\x00\xff\xfe",
    b"\x08" * 30,
    b"",
]

lines = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=40)), max_size=60)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.binary(max_size=4000))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    run = parse(data)
    assert run.bytes_read == len(data)
    assert run.status in ("complete", "partial", "failed", "empty", "unreadable")


@SETTINGS
@given(lines, st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_arbitrary_mixes_of_log_lines_never_raise(parts: list[bytes], sep: bytes) -> None:
    run = parse(sep.join(parts), name="result-p3-1-256-e0.txt")
    run.to_record()
    assert all(p.line is None or 1 <= p.line <= max(run.lines_read, 1) for p in run.problems)


@SETTINGS
@given(lines, st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=20))
# found by this test: a chunk that ends inside a UTF-8 character put the next bad byte one line late
@example([b"Epoch 1/3"] * 3 + [b"\xe1\x80\x80", b"\x80", b"Epoch 1/3"], [4])
def test_chunk_boundaries_never_change_the_run(parts: list[bytes], sizes: list[int]) -> None:
    data = b"\n".join(parts)
    chunks, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        chunks.append(data[i : i + n])
        i, k = i + n, k + 1
    assert parse(iter(chunks)).to_record() == parse(data).to_record()


_REAL = Path(__file__).resolve().parents[2].parent / "shared/fixtures/real-data/cloud-ML"
_SAMPLES = [
    _REAL / "seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker/logs/result-p2-1-1024-e0.txt",
    _REAL / "cnn-mnist/mnist-logs/p3.2xlarge/result-1-2048-e1.out",
    _REAL / "resnet50-cifar/experimental-results/2020-08-CIFAR-on-sagemaker/logs/result-p3-1-2048-e0.txt",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(_SAMPLES), st.floats(0, 1), st.floats(0, 1), st.binary(max_size=8), st.integers(1, 5000)
)
def test_any_cut_or_splice_of_a_real_log_never_raises_and_chunks_do_not_matter(
    path: Path, a: float, b: float, junk: bytes, size: int
) -> None:
    data = path.read_bytes()
    i, j = sorted((int(a * len(data)), int(b * len(data))))
    piece = data[i:j] + junk + data[j : j + 5000]
    whole = parse(piece, name=path.name)
    assert whole.status in ("complete", "partial", "failed", "empty", "unreadable")
    chunked = parse((piece[k : k + size] for k in range(0, len(piece), size)), name=path.name)
    assert chunked.to_record() == whole.to_record()
