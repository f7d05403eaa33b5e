"""``parse()``: one log, any dialect, streamed, into one :class:`RunTimings` plus its problems.

The log is read in chunks; each chunk is cut at its last newline so that every dialect reader sees whole
lines. Readers scan a region with one compiled bytes regex each and decode only what matched. All
readers see every region; the dialect is chosen at the end (MLLOG > MO833 > cloud-ML), so a log that
carries MLLOG events next to the seeds' human-readable lines is read once, from the structured events.
A user's ``log_format`` pattern (:mod:`trainsweep.logs.pattern`) replaces the sniffing: only it reads the log.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import queue
import re
import threading
from pathlib import Path
from typing import Any

from trainsweep import instances
from trainsweep.logs import checks, mllog, native, pattern
from trainsweep.logs.cloudml import CloudMLReader
from trainsweep.logs.mlperf import MllogReader, system_facts
from trainsweep.logs.mo833 import Mo833Reader
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.logs.pattern import PatternReader, compile_log_format
from trainsweep.logs.source import iter_chunks, source_name, source_path

MAX_LINE = 1 << 22
"""A line longer than this (4 MiB, no newline) is cut: it cannot be a log line worth reading whole."""

_TEXT_SAMPLE = 1 << 16
_TEXT_BYTES = bytes(range(0x20, 0x7F)) + b"\t\n\r\x08\x0c\x1b"
_LOG_SUFFIXES = (".txt", ".out", ".log")


class _Sha256:
    """The log's SHA-256, taken on a second thread from the second chunk on, while the readers parse
    (hashlib lets go of the GIL for large buffers): on a machine with a spare core the hash costs the
    parse no wall time. Chunks are handed over in order through a small bounded queue (memory stays
    bounded); one that is not ``bytes`` (a view of the caller's buffer) is copied first."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self._queue: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        self._chunks = 0

    def _run(self) -> None:
        assert self._queue is not None
        take, update = self._queue.get, self._sha.update
        while (chunk := take()) is not None:
            update(chunk)

    def update(self, chunk: bytes | memoryview) -> None:
        self._chunks += 1
        if self._chunks == 1:
            self._sha.update(chunk)  # a one-chunk log (most of them) starts no thread
            return
        if self._queue is None:
            self._queue = queue.Queue(maxsize=4)
            self._thread = threading.Thread(target=self._run, name="trainsweep-sha256", daemon=True)
            self._thread.start()
        self._queue.put(chunk if type(chunk) is bytes else bytes(chunk))

    def close(self) -> None:
        """Hash what is queued and end the thread (if one started)."""
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = self._thread = None

    def hexdigest(self) -> str:
        self.close()
        return self._sha.hexdigest()


def parse(
    source: Any,
    *,
    name: str | None = None,
    computing_system: str | None = None,
    batch_size: int | None = None,
    run_index: int | None = None,
    train_samples: int | None = None,
    log_format: str | re.Pattern[str] | None = None,
) -> RunTimings:
    """Parse one training log of any supported dialect into a :class:`RunTimings`.

    Args:
        source: a path, ``bytes``, a binary file object or an iterable of byte chunks.
        name: the run's name; default: the source's file name without its extension.
        computing_system: the seed VMTYPE (``p3-1``); default: from a ``result-VMTYPE-BS-eN`` or
            trainsweep job name.
        batch_size: default: from the name.
        run_index: the repetition ``N``; default: from the name.
        train_samples: training-set size used to check steps per epoch; default: what the log says.
        log_format: a spec's ``workload.log_format`` (text or compiled): read the log with this pattern
            only (:mod:`trainsweep.logs.pattern`) instead of sniffing the built-in dialects.

    Returns:
        The run. Problems with the content are in ``run.problems`` and ``run.status``; this function
        does not raise on content. A source that cannot be read at all gives status ``unreadable``.

    Raises:
        ValueError: ``log_format`` is not a usable pattern (the spec's validation refuses such a text).
    """
    path = source_path(source)
    session = LogParse(
        name if name is not None else source_name(source),
        naming_path=path if name is None else None,
        path=path,
        computing_system=computing_system,
        batch_size=batch_size,
        run_index=run_index,
        train_samples=train_samples,
        log_format=log_format,
    )
    try:
        for chunk in iter_chunks(source):
            session.feed(chunk)
    except (OSError, TypeError, ValueError) as exc:
        return session.unreadable(exc)
    except BaseException:
        session.close()  # a reader's crash: the hashing thread ends with it
        raise
    return session.finish()


class LogParse:
    """One log being read, chunk after chunk: :func:`parse` is a session fed every chunk, then finished.

    A session that does not hash the log (``hash_bytes=False``; :attr:`run` ``.sha256`` is given to
    :meth:`finish` instead) pickles between two chunks: :mod:`trainsweep.logs.resume` keeps it to
    read a growing log's new bytes only. Everything a later chunk or :meth:`finish` needs is an
    attribute of the session or of its readers, so a session unpickled and fed the rest of a log
    gives the run that one session fed the whole log gives.
    """

    def __init__(
        self,
        file_name: str | None,
        *,
        naming_path: Path | None = None,
        path: Path | None = None,
        computing_system: str | None = None,
        batch_size: int | None = None,
        run_index: int | None = None,
        train_samples: int | None = None,
        log_format: str | re.Pattern[str] | None = None,
        hash_bytes: bool = True,
    ) -> None:
        compiled = compile_log_format(log_format) if isinstance(log_format, str) else log_format
        run = self.run = RunTimings(name=_run_name(file_name))
        naming = self.naming = checks.NameFacts.infer(file_name, naming_path)
        run.computing_system = computing_system if computing_system is not None else naming.vmtype
        run.batch_size = batch_size if batch_size is not None else naming.batch_size
        run.run_index = run_index if run_index is not None else naming.run
        if naming.platform is not None:
            run.extra[mllog.PLATFORM] = naming.platform
        self.path = path
        self.train_samples = train_samples
        self.cloud, self.mo, self.ml = CloudMLReader(), Mo833Reader(), MllogReader()
        self.user = PatternReader(compiled) if compiled is not None else None
        self._sha = _Sha256() if hash_bytes else None
        self.text = _TextCheck()
        self.carry = b"\n"  # the virtual newline before the first line
        self.newlines_before = 0
        self.newlines = 0
        self.last_byte = b""

    @property
    def readers(self) -> tuple[CloudMLReader | Mo833Reader | MllogReader | PatternReader, ...]:
        return (self.user,) if self.user is not None else (self.cloud, self.mo, self.ml)

    def __getstate__(self) -> dict[str, Any]:
        if self._sha is not None:
            raise TypeError("a session that hashes the log cannot be pickled (hash_bytes=False)")
        return self.__dict__

    def feed(self, chunk: bytes) -> None:
        """Read the next chunk of the log (raises what a reader raises on a chunk it cannot take)."""
        run, text, carry = self.run, self.text, self.carry
        if self._sha is not None:
            self._sha.update(chunk)
        run.bytes_read += len(chunk)
        self.newlines += (native.count_newlines or _count_newlines)(chunk)
        self.last_byte = chunk[-1:]
        text.feed(chunk, self.newlines_before + carry.count(b"\n"))
        # The carry holds one newline, its first byte: the region ends at the chunk's last newline.
        cut = chunk.rfind(b"\n")
        cut_long_line = cut < 0 and len(carry) + len(chunk) > MAX_LINE
        if cut < 0 and not cut_long_line:
            self.carry = carry + chunk
            return
        # The region keeps the newline that ends its last line (the carry starts with it too): a value
        # must be followed by its line end, and the last line of a log cut short has none. It is
        # made with one copy (join of a view); the carry is the rest, from that newline on.
        if cut_long_line:
            text.long_line = True
            region, self.carry = carry + chunk, b"\n"
        else:
            region, self.carry = b"".join((carry, memoryview(chunk)[: cut + 1])), bytes(chunk[cut:])
        for r in self.readers:
            r.feed(region, self.newlines_before)
        # Newlines before the next region: all read so far (plus the virtual first one) but the carry's.
        self.newlines_before = self.newlines + 1 - self.carry.count(b"\n")
        if cut_long_line:
            self.newlines_before -= 1  # the b"\n" put in front of the rest is not in the log

    def close(self) -> None:
        """End the hashing thread, if any (a session given up on)."""
        if self._sha is not None:
            self._sha.close()

    def unreadable(self, exc: Exception) -> RunTimings:
        """The run of a source whose bytes could not all be read (``exc``: why)."""
        run = self.run
        run.add_problem("read-error", f"the log could not be read: {exc}", None, "error")
        run.status = "unreadable"
        run.sha256 = self._sha.hexdigest() if self._sha is not None else None
        run.lines_read = self.newlines
        return run

    def finish(self, sha256: str | None = None) -> RunTimings:
        """The run of every byte fed (the session is spent). ``sha256``: the log's SHA-256 (hex) when
        the session does not hash (``hash_bytes=False``)."""
        run, cloud, mo, ml, user = self.run, self.cloud, self.mo, self.ml, self.user
        # every byte is read: the hashing thread, if any, ends here
        run.sha256 = self._sha.hexdigest() if self._sha is not None else sha256
        if len(self.carry) > 1:
            for r in self.readers:
                r.feed(self.carry, self.newlines_before)
        self.text.finish()

        run.lines_read = self.newlines + (1 if self.last_byte not in (b"", b"\n") else 0)
        cloud.finish()
        ml.finish()
        if user is not None:
            user.finish()

        for code, message, line, severity in self.text.problems:
            run.add_problem(code, message, line, severity)  # type: ignore[arg-type]
        if user is not None:
            _from_pattern(run, user)
        else:
            dialect = _choose_dialect(cloud, mo, ml)
            if dialect == "mllog":
                _from_mllog(run, ml)
                if mllog.SUBMISSION_BENCHMARK in ml.extra:
                    _from_mlperf(run, ml, self.path)
            elif dialect == "mo833":
                _from_mo833(run, mo)
            elif dialect == "cloud-ml":
                _from_cloudml(run, cloud)
        for reader in self.readers:
            for code, message, line, severity in reader.problems:
                run.add_problem(code, message, line, severity)  # type: ignore[arg-type]
        train_samples = self.train_samples
        if train_samples is not None:
            run.header.train_samples = run.header.train_samples or train_samples
        checks.check_run(
            run,
            self.naming,
            self.text,
            cloud if run.dialect == "cloud-ml" else None,
            ml,
            train_samples,
            pattern_lines=user.matched_lines if user is not None else None,
        )
        run.problems.sort(key=lambda p: (p.line is not None, p.line or 0))
        return run


def _from_mlperf(run: RunTimings, r: MllogReader, path: Path | None) -> None:
    """An MLPerf result log (it names its ``submission_benchmark``): the run as MLPerf defines it, in
    ``run.extra[trainsweep.mlperf]``; the batch size is the global one; the system is the submission's
    ``systems/<system>.json`` beside ``results/<system>/<benchmark>/`` (else the log's ``:::SYSJSON``)."""
    entry, problems = r.mlperf.summary(run.header.train_samples)
    for code, message in problems:
        run.add_problem(code, message)
    system = entry["system"]
    described = _mlperf_system_file(run, path)
    if described is not None:
        entry["system"] = system = described
    info = {
        "benchmark": str(r.extra.get(mllog.SUBMISSION_BENCHMARK)),
        "submitter": r.extra.get(mllog.SUBMISSION_ORG),
        "division": r.extra.get(mllog.SUBMISSION_DIVISION),
        "platform": r.extra.get(mllog.SUBMISSION_PLATFORM),
    }
    if path is not None and len(path.parents) >= 3 and path.parents[2].name == "results":
        info["system_folder"] = path.parents[1].name  # results/<system>/<benchmark>/result_N.txt
    run.extra[mllog.MLPERF] = info | entry
    if run.batch_size is None:
        run.batch_size = run.header.batch_size
    if system is not None:
        if run.header.gpus is None:
            run.header.gpus = system["accelerators"]
        itype = _cloud_instance_type(system["system_name"])
        if itype is not None and run.header.instance_type is None:
            run.header.instance_type = itype
    if r.mlperf.status is None and run.status == "complete":
        run.status = "partial"
        run.add_problem(
            "ends-early", "the log ends before run_stop: the run did not finish, it has no time to train"
        )


def _mlperf_system_file(run: RunTimings, path: Path | None) -> dict[str, Any] | None:
    """``<submitter>/systems/<system>.json`` for a log at ``<submitter>/results/<system>/<benchmark>/``."""
    if path is None or len(path.parents) < 4 or path.parents[2].name != "results":
        return None
    described = path.parents[3] / "systems" / f"{path.parents[1].name}.json"
    if not described.is_file():
        return None
    where = f"systems/{described.name}"
    try:
        desc = json.loads(described.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        run.add_problem("mlperf-system", f"{where} beside the results cannot be read: {exc}"[:300])
        return None
    if not isinstance(desc, dict):
        run.add_problem("mlperf-system", f"{where} beside the results is not a JSON object")
        return None
    return system_facts(desc, where)


def _cloud_instance_type(system_name: str | None) -> str | None:
    """The SageMaker type an MLPerf system name spells exactly (``p5.48xlarge``, ``2xp5.48xlarge``: N
    nodes of it), else None: a system such as Oracle's ``BM.GPU.H100.8`` is not one, and is not guessed."""
    if not system_name:
        return None
    name = re.sub(r"^\d+x", "", system_name.strip())
    name = name if name.startswith("ml.") else "ml." + name
    return name if name in instances.CATALOGUE and not instances.CATALOGUE[name].is_local else None


def _choose_dialect(cloud: CloudMLReader, mo: Mo833Reader, ml: MllogReader) -> str | None:
    """The dialect with the most steps; on a tie MLLOG, then MO833 (the container echoes seed lines)."""
    steps = {
        "mllog": sum(e.steps for eps in ml.ranks.values() for e in eps.values()) if ml.has_data else -1,
        "mo833": sum(e.steps for eps in mo.ranks.values() for e in eps.values()) if mo.has_data else -1,
        "cloud-ml": sum(e.steps for e in cloud.epochs) if cloud.records else -1,
    }
    best = max(steps.values())
    if best < 0:
        return None
    return next(d for d in ("mllog", "mo833", "cloud-ml") if steps[d] == best)


def _count_newlines(chunk: bytes) -> int:
    return chunk.count(b"\n")


def _run_name(file_name: str | None) -> str:
    if not file_name:
        return "run"
    base = Path(file_name).name
    for suffix in _LOG_SUFFIXES:
        if base.endswith(suffix):
            return base[: -len(suffix)] or "run"
    return base


class _TextCheck:
    """Is the log text? Binary garbage, undecodable bytes, over-long lines, empty content."""

    def __init__(self) -> None:
        self.sampled = 0
        self.other = 0
        self.nonblank = False
        self.long_line = False
        self.undecodable_line: int | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._decoding = True
        self.problems: list[tuple[str, str, int | None, str]] = []

    def feed(self, chunk: bytes, newlines_before: int) -> None:
        if not self.nonblank and chunk.strip():
            self.nonblank = True
        if self.sampled < _TEXT_SAMPLE:
            sample = chunk[: _TEXT_SAMPLE - self.sampled]
            self.sampled += len(sample)
            self.other += len(sample.translate(None, _TEXT_BYTES))
        if self._decoding and not (chunk.isascii() and not self._pending()):
            # the decoder's offsets count the bytes it kept from the previous chunk (a character cut in two)
            carried = len(self._decoder.getstate()[0])
            try:
                self._decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                self._decoding = False
                self.undecodable_line = newlines_before + chunk.count(b"\n", 0, max(0, exc.start - carried))

    def _pending(self) -> bool:
        return bool(self._decoder.getstate()[0])

    def finish(self) -> None:
        if self._decoding:
            try:
                self._decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                self._decoding = False
                self.undecodable_line = None
        if self.undecodable_line is not None or not self._decoding:
            self.problems.append(
                (
                    "undecodable-bytes",
                    "the log has bytes that are not UTF-8 text (the first on this line); they are read as "
                    "they are: a line that holds one is still read when its literal and numbers are whole, "
                    "else it is listed as a bad line",
                    self.undecodable_line,
                    "warning",
                )
            )
        if self.long_line:
            self.problems.append(
                ("long-line", f"a line is longer than {MAX_LINE} bytes; read in pieces", None, "warning")
            )

    @property
    def binary(self) -> bool:
        return self.sampled > 0 and self.other > max(8, self.sampled // 10)


def primary_rank(ranks: dict[int, dict[int, Epoch]]) -> int:
    return 0 if 0 in ranks else min(ranks)


def _ranks_to_run(run: RunTimings, ranks: dict[int, dict[int, Epoch]]) -> None:
    if not ranks:
        return
    run.ranks = {r: [eps[i] for i in sorted(eps)] for r, eps in sorted(ranks.items())}
    run.epochs = run.ranks[primary_rank(ranks)]


def _from_cloudml(run: RunTimings, r: CloudMLReader) -> None:
    run.dialect = "cloud-ml"
    run.header = r.header
    run.epochs = r.epochs
    run.init_s, run.fit_s, run.total_s, run.model_save_s = r.init_s, r.fit_s, r.total_s, r.model_save_s
    run.real_time = r.real_time
    run.extra.update(r.extra)
    if r.last_step_form:
        run.extra["last_step_form"] = "N steps training"
    if r.traceback is not None:
        run.status = "failed"
        run.failure_reason = r.traceback
        run.add_problem("failed", f"the job failed: {r.traceback}", r.traceback_line, "error")


def _from_pattern(run: RunTimings, r: PatternReader) -> None:
    run.dialect = pattern.DIALECT
    run.epochs = r.epochs
    run.real_time = r.real_time
    run.extra["log_format"] = {"pattern": r.pattern.pattern, "matched_lines": r.matched_lines}


def _from_mo833(run: RunTimings, r: Mo833Reader) -> None:
    run.dialect = "mo833"
    _ranks_to_run(run, r.ranks)
    primary = primary_rank(r.ranks) if r.ranks else (0 if 0 in r.init_s else min(r.init_s))
    run.init_s = r.init_s.get(primary)
    run.total_s = r.elapsed_s.get(primary)
    seen = set(r.ranks) | set(r.init_s)
    run.header.world_size = len(seen) if len(seen) > 1 else None


def _from_mllog(run: RunTimings, r: MllogReader) -> None:
    run.dialect = "mllog"
    run.header = r.header
    _ranks_to_run(run, r.ranks)
    for attr, v in r.durations.items():
        setattr(run, attr, v)
    run.real_time = r.real_time
    run.prediction = r.prediction
    run.extra.update(r.extra)
    if r.failure is not None:
        run.status = "failed"
        reason = str(r.failure.get("reason") or "the training container reported a failure")
        kind = r.failure.get("kind")
        run.failure_reason = reason
        if kind:
            run.extra["failure_kind"] = kind
        run.add_problem("failed", f"the job failed ({kind or 'error'}): {reason}", None, "error")
    elif r.run_stop_status not in (None, "success"):
        run.status = "failed"
        run.failure_reason = f"run_stop status {r.run_stop_status}"
        run.add_problem("failed", f"the run stopped with status {r.run_stop_status!r}", None, "error")
