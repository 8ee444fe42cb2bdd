"""The `ragbudget` command: parser, commands, terminal views and the demo.

Imported only by the console script; `ragbudget --help` loads the parser and
nothing of the pipeline.
"""

from langchain_ragbudget.cli._main import main, run

__all__ = ["main", "run"]
