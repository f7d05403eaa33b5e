"""The lines of the cloud-ML seed dialect as bytes patterns (read by :mod:`trainsweep.logs.cloudml`).

Rare lines (epoch headers and times, run times, dataset sizes, banners, tracebacks) are one regex,
:data:`RARE`, whose kind is the name of its last group (:data:`KIND_OF`); frequent lines (steps and
wall-clock stamps) are read in bulk between two rare lines with :data:`STEP_LINE` and :data:`REAL`, or
one by one with :data:`STEP` where a stretch holds a line that is not plain.
"""

from __future__ import annotations

import re

from trainsweep.logs.numbers import NUMX

_STOP = rb"(?![0-9A-Za-rt-z_.]|s[0-9A-Za-z_.])"
"""What may not follow a value of a rare line: more of a number (``0x1p3``, ``1_000``, ``1.2.3``) or a word;
its ``s`` unit may. Such a line is not read (never read as its first digits)."""


def _value(name: bytes) -> bytes:
    """A rare line's value, as the named group ``name``, and what may not follow it."""
    return rb"(?P<" + name + rb">" + NUMX + rb")" + _STOP


# Lines that change state or carry run-level facts: one regex, every alternative starts with a literal
# character after the newline, so that a line that is none of them is rejected after one comparison.
# The kind of a match is the name of its last group (``m.lastindex``); other values precede it.
RARE = re.compile(
    rb"\n(?=[EVo(TIDxCU ])(?:"  # the first characters below: one set test rejects most lines
    rb"Epoch (?:(\d+)/(?P<ehdr>\d+)|time: " + _value(b"etime") + rb")"
    rb"|Validation time: " + _value(b"vtime") +
    rb"|on_epoch_(?:begin: " + _value(b"ebeg") + rb"|end: " + _value(b"eend") + rb")"
    rb"|\('Tempo de [Ii]nicializacao: ', " + _value(b"init2") +
    rb"|Tempo (?:de [Ii]nicializacao:? " + _value(b"init3") + rb"|do fit: " + _value(b"fit") +
    rb"|levado para o modelo ser salvo: " + _value(b"save") + rb")"
    rb"|Initialization [Tt]ime:? " + _value(b"init") +
    rb"|Duracao do treinamento: *" + _value(b"total") +
    rb"|Train(?: on (?P<trainon>\d+) samples|ing(?P<done> complete)|ing(?P<pre> \.\.\.))"
    rb"|x_train shape: \((?P<xshape>\d+),"
    rb"|Conjunto de treinamento: \((?P<conj>\d+),"
    rb"| (?:   )?- (Total|Tamanho do batch|GPUs solicitadas|Numero de epocas): (?P<banner>\d+)"
    rb"|Traceback(?P<tb> \(most recent call last\))"
    rb"|Test (loss|accuracy): " + _value(b"test") +
    rb"|D(?:ownloading data from|ados carregados de)(?P<pre2>)"
    rb"|Using TensorFlow backend(?P<pre3>)"
    rb")"
)  # fmt: skip
RARE_STARTS = (
    b"Epoch ",
    b"Validation time: ",
    b"on_epoch_",
    b"('Tempo de ",
    b"Tempo ",
    b"Initialization ",
    b"Duracao do treinamento:",
    b"Train",
    b"x_train shape: (",
    b"Conjunto de treinamento: (",
    b" - ",
    b"    - ",
    b"Traceback",
    b"Test ",
    b"Downloading data from",
    b"Dados carregados de",
    b"Using TensorFlow backend",
)
"""What every line :data:`RARE` matches begins with (tested against its alternatives): where the C scanner
is built, it finds the lines that begin with one of these, and RARE is tried on them only."""
_KIND = {i: name for name, i in RARE.groupindex.items()}
_KIND_ALIAS = {"init2": "init", "init3": "init", "conj": "xshape", "pre2": "pre", "pre3": "pre"}
KIND_OF = {i: _KIND_ALIAS.get(name, name) for i, name in _KIND.items()}

# Frequent lines, read in bulk (``findall``) between two rare lines: steps and wall-clock stamps. A step
# line is its number (after optional blanks), the literal and its time, then its end; a stamp is the
# literal and its value, then its end. The end is what the seed's parser (``line.split()``) lets through:
# the unit, then blanks or anything after a blank or a non-ASCII byte; without the unit, blanks and
# anything after a non-ASCII byte (``0.25 ms`` is no step time in seconds). Anything else holding the
# literal is a bad line: dropped and reported, never paired with a number or value of another line.
STEP_LIT = b"step training time: "
LAST_STEP_LIT = b" steps training: "
REAL_LIT = b"Real time: "
_END = rb"(?:s(?:[ \t\r\x0b\x0c\x80-\xff][^\n]*)?|[ \t\r\x0b\x0c]*(?:[\x80-\xff][^\n]*)?)(?=\n)"
_STAMP_END = rb"s?(?:[ \t\r\x0b\x0c\x80-\xff][^\n]*)?(?=\n)"
"""A stamp's end: a Unix time has no other unit, so anything may follow it after a blank."""
_LEAD = rb"\n[ \t]*"
STEP_LINE = re.compile(_LEAD + rb"(\d+) step training time: (" + NUMX + rb")" + _END)
STEP = re.compile(_LEAD + rb"(\d+) (?:step training time|steps training): (" + NUMX + rb")" + _END)
STEP_ANY = re.compile(rb"step training time: |steps training: ")
REAL = re.compile(rb"Real time: (" + NUMX + rb")" + _STAMP_END)
# val_accuracy sits at the end of the last progress bar of an epoch, not at a line start.
VACC = re.compile(rb"val_acc(?:uracy)?: (" + NUMX + rb")" + _STOP)
VACC_LIT = b"val_acc"


# The command line (``python3 mnist_cnn.py --batch-size 1024 ...``) is looked for at the top of the log.
CMD = re.compile(rb"\n((?:[^\s/]*/)*python[0-9.]*[ \t][^\n]*?\.py\b[^\n]*)")
CMD_WINDOW = 1 << 16

# The first Keras progress bar of the first epoch: ``  256/60000 [....`` -> batch size 256 of 60000.
FIRST_BAR = re.compile(rb"\n[\x08\r ]*(\d+)/(\d+) \[[=>.]")
BAR_WINDOW = 1 << 16
TB_WINDOW = 1 << 16
EXC_LINE = re.compile(rb"\n([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b[^\n]*)")
RUN_TIMES = {
    "init": ("init time", "init_s"),
    "fit": ("fit time", "fit_s"),
    "save": ("model save time", "model_save_s"),
    "total": ("total time", "total_s"),
}
BANNER_FIELDS = {
    "Total": "train_samples",
    "Tamanho do batch": "batch_size",
    "GPUs solicitadas": "gpus",
    "Numero de epocas": "epochs",
}
CMD_OPT = re.compile(r"--(batch[-_]size|num[-_]gpus|gpus|epochs)[= ](\d+)")
