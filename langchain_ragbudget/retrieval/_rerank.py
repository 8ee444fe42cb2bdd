"""Rerank stage: a FlashRank cross-encoder as a LangChain document compressor.

Unlike `langchain_community`'s FlashrankRerank, it keeps `Document.id` and
metadata, and records what it removes. FlashRank downloads without a timeout, so
the model is fetched here, with one.
"""

from __future__ import annotations

import logging
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from langchain_ragbudget.config._disk import cache_root, publish_folder
from langchain_ragbudget.config._overrides import (
    field_names,
    known_keywords,
    refuse_unknown,
)
from langchain_ragbudget.config._settings import (
    ConfigLike,
    RerankSettings,
    RetrievalSettings,
    as_config,
    default_of,
)
from langchain_ragbudget.errors import InvalidInputError, ModelUnavailableError
from langchain_ragbudget.ledger._identity import (
    document_key,
    unique_documents,
    with_metadata,
)
from langchain_ragbudget.ledger._metadata_keys import RERANK_RANK, RERANK_SCORE
from langchain_ragbudget.ledger._records import (
    CandidateList,
    DropReason,
    DropRecord,
    ScoreIssue,
    Stage,
    StageSkip,
    ledgers_of,
    records_of,
)
from langchain_ragbudget.ledger._validation import (
    check_documents,
    check_query,
    finite_score,
)
from langchain_ragbudget.retrieval._logging_guard import root_logger_untouched
from langchain_ragbudget.retrieval._model_cache import shared

logger = logging.getLogger(__name__)


class FlashRankRerank(
    BaseDocumentCompressor, RunnableSerializable[dict[str, Any], dict[str, Any]]
):
    """Rerank candidates with FlashRank; keep `top_n`, record the rest.

    A compressor (`compress_documents(documents, query)`) and a Runnable
    (`{"question", "documents"}` in, the same dict out, reranked). Adds
    `rerank_score` and `rerank_rank`. The model loads when the object is made;
    when it cannot be had, `on_unavailable="skip"` passes documents through with
    a `StageSkip` record, so the answer says the stage did not run.

    Attributes:
        model: A FlashRank cross-encoder name (listwise models are refused).
        cache_dir: Where models live; the user cache folder if None.
        max_length: Tokens of query plus passage the model reads.
        top_n: Passages kept; the rest are recorded as reranked out.
        score_floor: Passages under it (or with a non-finite score) are recorded
            as under the score floor; None for no floor.
        on_unavailable: `skip` (pass documents through, recorded) or `error`.
        download: Whether a missing model may be downloaded.
        download_timeout: Seconds allowed for connecting and for each read.
        id_key: The metadata key that identifies a passage without `Document.id`.
        query_key: The input dict's key holding the query (as a Runnable).

    Raises:
        ModelUnavailableError: On creation, with `on_unavailable="error"`, when the
            model is unknown, missing and not downloadable, or fails to load.

    Example:
        .. code-block:: python

            from langchain_ragbudget import FlashRankRerank

            rerank = FlashRankRerank(top_n=5, score_floor=0.1, on_unavailable="error")
            kept = rerank.compress_documents(candidates, "what lowers blood pressure?")
            print([d.metadata["rerank_score"] for d in kept], kept.drops)

            chain = {"question": lambda q: q, "documents": retriever} | rerank
    """

    model: str = default_of(RerankSettings, "model")
    cache_dir: str | None = None
    max_length: int = Field(default_of(RerankSettings, "max_length"), ge=8)
    top_n: int = Field(default_of(RerankSettings, "top_n"), ge=1)
    score_floor: float | None = Field(None, allow_inf_nan=False)
    on_unavailable: Literal["skip", "error"] = default_of(
        RerankSettings, "on_unavailable"
    )
    download: bool = default_of(RerankSettings, "download")
    download_timeout: float = Field(
        default_of(RerankSettings, "download_timeout"), gt=0
    )
    id_key: str | None = default_of(RetrievalSettings, "id_key")
    query_key: str = "question"

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _ranker: Any = PrivateAttr(default=None)
    _unavailable: str | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        """Load the model now, so `on_unavailable: error` fails at start-up."""
        try:
            self._ranker = _load_ranker(
                self.model,
                self.model_cache_dir,
                self.max_length,
                download=self.download,
                timeout=self.download_timeout,
            )
        except ModelUnavailableError as exc:
            if self.on_unavailable == "error":
                raise
            self._unavailable = str(exc)
            # every report carries the skip and the warning line names it once
            logger.info("rerank stage will be skipped: %s", exc)

    @classmethod
    def from_config(
        cls, config: ConfigLike = None, **overrides: Any
    ) -> FlashRankRerank | None:
        """The stage as the `rerank:` section describes it, or None when disabled.

        None means no stage: no model loaded and no rerank warning; pass it to
        `create_budgeted_rag_chain(reranker=...)` as it is.

        Args:
            config: A configuration, a YAML file, or None for the defaults.
            **overrides: Fields to set instead of the configured ones.

        Raises:
            ConfigError: The file is invalid (before any model is loaded).
            TypeError: A keyword is not a field of the stage (`enabled` is
                not: switch the stage off in the configuration).
            ModelUnavailableError: The model cannot be had and
                `on_unavailable` is `error`.
        """
        config = as_config(config)
        refuse_unknown("FlashRankRerank.from_config()", overrides, field_names(cls))
        if not config.rerank.enabled:
            return None
        settings = config.rerank.model_dump(exclude={"enabled"})
        return cls(**{**settings, "id_key": config.retrieval.id_key, **overrides})

    @model_validator(mode="before")
    @classmethod
    def _known_keywords(cls, data: Any) -> Any:
        return known_keywords(cls, data)

    @property
    def model_cache_dir(self) -> Path:
        """Where FlashRank models live: configured, else the user cache folder."""
        return Path(self.cache_dir) if self.cache_dir else cache_root() / "flashrank"

    @property
    def available(self) -> bool:
        """Whether the model loaded; when False the stage passes documents through."""
        return self._ranker is not None

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> CandidateList:
        """Rerank `documents` for `query`; past top_n or under the floor is recorded.

        Records also go to the run ledgers the documents carry, so a caller that
        copies the returned list loses none of them.

        Returns:
            The kept documents, best first, with earlier records and this stage's
            drops; unchanged, with a `StageSkip`, when the model is unavailable.

        Raises:
            InvalidInputError: `documents` is not a list of Documents or `query`
                is not a non-empty string.
        """
        given = check_documents(documents)
        query = check_query(query)
        upstream, skipped, issues = records_of(given)
        ledgers = ledgers_of(given)
        # one distinct key per candidate, as its Document.id, from here on
        documents = unique_documents(
            given, self.id_key, (record.key for record in upstream)
        )
        if self._ranker is None:
            skip = StageSkip(Stage.RERANK, str(self._unavailable))
            for ledger in ledgers:
                ledger.add(skipped=[skip])
            return CandidateList(documents, upstream, [*skipped, skip], issues)
        if not documents:
            return CandidateList([], upstream, skipped, issues)
        from flashrank import RerankRequest

        passages = [
            {"id": i, "text": doc.page_content} for i, doc in enumerate(documents)
        ]
        ranked = self._ranker.rerank(RerankRequest(query=query, passages=passages))
        kept: list[Document] = []
        drops: list[DropRecord] = []
        new_issues: list[ScoreIssue] = []
        for rank, passage in enumerate(ranked, start=1):
            source = documents[passage["id"]]
            key = document_key(source, self.id_key)
            score = finite_score(passage["score"])
            if score is None:
                new_issues.append(
                    ScoreIssue(Stage.RERANK, key, RERANK_SCORE, repr(passage["score"]))
                )
            metadata = {**source.metadata, RERANK_RANK: rank}
            if score is None:
                metadata.pop(RERANK_SCORE, None)
            else:
                metadata[RERANK_SCORE] = score
            document = with_metadata(source, metadata)
            reason, detail = self._verdict(score, len(kept))
            if reason is None:
                kept.append(document)
            else:
                drops.append(
                    DropRecord(key, Stage.RERANK, reason, rank, document, detail=detail)
                )
        for ledger in ledgers:
            ledger.add(drops, issues=new_issues)
        return CandidateList(kept, upstream + drops, skipped, issues + new_issues)

    def _verdict(
        self, score: float | None, n_kept: int
    ) -> tuple[DropReason | None, str]:
        if self.score_floor is not None and score is None:
            return DropReason.SCORE_FLOOR, "rerank score is not a finite number"
        if (
            self.score_floor is not None
            and score is not None
            and score < self.score_floor
        ):
            return DropReason.SCORE_FLOOR, (
                f"rerank score {score:.3f} < floor {self.score_floor:g}"
            )
        if n_kept >= self.top_n:
            return DropReason.RERANKED_OUT, f"past top_n={self.top_n}"
        return None, ""

    def invoke(
        self,
        input: dict[str, Any],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """`{"question", "documents"}` -> the same dict, documents reranked.

        Raises:
            InvalidInputError: `input` is not such a dict, or its values are not
                a query and a list of Documents.
        """
        return self._call_with_config(self._invoke, input, config, **kwargs)

    def _invoke(self, input: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(input, dict) or "documents" not in input:
            raise InvalidInputError(
                "FlashRankRerank as a Runnable takes a dict with "
                f"'{self.query_key}' and 'documents'; got {type(input).__name__}"
            )
        query = input.get(self.query_key)
        return {
            **input,
            "documents": self.compress_documents(
                check_documents(input["documents"]),
                check_query(query, f"input[{self.query_key!r}]"),
            ),
        }


def _load_ranker(
    model: str, cache_dir: Path, max_length: int, *, download: bool, timeout: float
) -> Any:
    """A flashrank.Ranker for `model` (one per process), fetched if absent, allowed."""
    from flashrank import Ranker
    from flashrank.Config import listwise_rankers, model_file_map

    if model not in model_file_map or model in listwise_rankers:
        known = ", ".join(sorted(set(model_file_map) - set(listwise_rankers)))
        raise ModelUnavailableError(
            f"{model!r} is not a FlashRank cross-encoder; known: {known}"
        )
    model_file = cache_dir / model / model_file_map[model]
    if not model_file.is_file():
        if not download:
            raise ModelUnavailableError(
                f"{model_file} is missing and rerank.download is off"
            )
        _download_model(model, cache_dir, timeout)
    try:
        with root_logger_untouched():
            return shared(
                ("flashrank", model, str(cache_dir), max_length),
                lambda: Ranker(
                    model_name=model, cache_dir=str(cache_dir), max_length=max_length
                ),
            )
    except Exception as exc:
        raise ModelUnavailableError(
            f"FlashRank could not load {model!r} from {cache_dir}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _download_model(model: str, cache_dir: Path, timeout: float) -> None:
    """Fetch and unpack FlashRank's zip, atomically: no half model is left behind."""
    import requests
    from flashrank.Config import model_url

    url = model_url.format(model)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".download-") as tmp:
        archive = Path(tmp) / f"{model}.zip"
        try:
            with requests.get(url, stream=True, timeout=(timeout, timeout)) as response:
                response.raise_for_status()
                with archive.open("wb") as out:
                    for chunk in response.iter_content(chunk_size=1 << 16):
                        out.write(chunk)
            with zipfile.ZipFile(archive) as bundle:
                bundle.extractall(tmp)
        except (requests.RequestException, zipfile.BadZipFile, OSError) as exc:
            raise ModelUnavailableError(
                f"could not download FlashRank model {model!r} "
                f"({type(exc).__name__}); offline? put its folder in {cache_dir} "
                "or set rerank.cache_dir"
            ) from exc
        publish_folder(Path(tmp) / model, cache_dir / model, replace=True)
