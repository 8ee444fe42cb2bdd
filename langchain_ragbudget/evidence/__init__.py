"""Weak evidence: how strong a candidate list is, and which sentences matter."""

from langchain_ragbudget.evidence._assess import (
    Calibration,
    Evidence,
    calibrate_threshold,
    top_score,
)

__all__ = [
    "Calibration",
    "Evidence",
    "calibrate_threshold",
    "top_score",
]
