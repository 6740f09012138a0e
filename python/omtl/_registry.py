"""The one list of public learners: the names ``omtl.learners`` (native) and ``omtl.reference``
(NumPy twins) both export, each native class built through its ``_native_kind`` in the native
registry (``omtl._native.LEARNER_KINDS``, src/python/registry.rs). Adding a learner adds its name
here; the tests check that every name has a native class, a reference twin and a registered kind.
"""

from __future__ import annotations

# Public class names, then their aliases (A-C9: the paper's other names for the Projectrons).
LEARNERS = (
    "CWCOL",
    "KernelPerceptron",
    "MTBPRJ",
    "MTBPRJ2",
    "MTFL",
    "MTFORG",
    "MTLinear",
    "MTPerceptron",
    "MTRBP",
    "OMTL",
    "OMTRL",
    "PAGlobal",
    "PAUnique",
    "ROMCO",
    "TRML",
)
ALIASES = {"MTPRJ": "MTBPRJ", "MTPRJ2": "MTBPRJ2"}

#: What ``omtl.learners`` and ``omtl.reference`` export.
EXPORTS = sorted((*LEARNERS, *ALIASES))
