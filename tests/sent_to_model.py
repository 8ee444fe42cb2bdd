"""A callback that keeps what a chain sent its chat model, and the budget's reports.

Shared by the tests that check the prompt as the model receives it (the model is
a fake standing in for an LLM API).
"""

from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage


class Sent(BaseCallbackHandler):
    """The messages each chat-model call was given, and the budget's reports."""

    def __init__(self) -> None:
        self.messages: list[list[BaseMessage]] = []
        self.reports: list[dict[str, Any]] = []

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> Any:
        self.messages.append(list(messages[0]))

    @property
    def prompts(self) -> list[str]:
        """Each call's messages as one text, a line per message."""
        return ["\n".join(str(m.content) for m in call) for call in self.messages]

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.reports.append(data)
