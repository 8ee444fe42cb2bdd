"""When a surface's evidence counts as weak."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictFloat, StrictStr, model_validator

from langchain_ragbudget.config._fields import StrictModel
from langchain_ragbudget.config._weak_model import CalibratedWith, CombinedEvidence


class WeakEvidenceSettings(StrictModel):
    """When the evidence counts as weak (said in the prompt and under the answer).

    Attributes:
        method: `threshold` (the best kept score against `thresholds`) or
            `combined` (the fitted model on the candidates the budget receives).
        thresholds: Score key to threshold, tried in order; the first key a kept
            passage carries decides (null disables a key).
        precision: The weak flag's precision `ragbudget eval` fits a threshold for.
        combined: The fitted logistic model; required by `method: combined`.
        calibrated_with: The models it was calibrated with (null: never stale).
    """

    method: Literal["threshold", "combined"] = "threshold"
    thresholds: dict[StrictStr, StrictFloat | None] = Field(default_factory=dict)
    precision: StrictFloat = Field(0.8, gt=0, le=1)
    combined: CombinedEvidence | None = None
    calibrated_with: CalibratedWith | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_flat_form(cls, data: Any) -> Any:
        if isinstance(data, dict):
            flat = [k for k in data if k not in cls.model_fields and "_score" in str(k)]
            if flat:
                raise ValueError(
                    f"score thresholds go under weak_evidence.thresholds (found "
                    f"{', '.join(map(str, flat))} directly under weak_evidence)"
                )
        return data

    @model_validator(mode="after")
    def _model_for_combined(self) -> WeakEvidenceSettings:
        if self.method == "combined" and self.combined is None:
            raise ValueError(
                "method 'combined' needs a fitted model under weak_evidence.combined "
                "(write one with `ragbudget eval --weak-evidence-yaml`)"
            )
        return self
