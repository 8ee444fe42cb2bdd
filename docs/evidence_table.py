"""Draw the picture of the README's "Use from Jupyter": a budgeted context's display.

The HTML is exactly what a notebook shows for `BudgetedContext` (its
`_repr_html_`), for the demo's question through the demo's tight `chat` surface,
drawn by headless Chromium inside JupyterLab's own style sheets
(`jupyterlab_page`: needs `apt-get install chromium` and `pip install jupyterlab`),
so the picture is what JupyterLab shows, not a standalone page.

    python docs/evidence_table.py [--out docs/evidence_table.png]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jupyterlab_page import chromium, jupyterlab_css, render

from langchain_ragbudget import ContextBudget, HybridRetriever, load_config
from langchain_ragbudget.sample import (
    demo_config_path,
    load_sample_corpus,
    load_sample_questions,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/evidence_table.png"))
    args = parser.parse_args()
    browser, css = chromium(), jupyterlab_css()
    if browser is None or css is None:
        raise SystemExit(
            "needs headless Chromium (apt-get install chromium) and JupyterLab's "
            "CSS (pip install jupyterlab)"
        )
    config = load_config(demo_config_path())
    question = load_sample_questions()[0]["question"]
    retriever = HybridRetriever.from_config(config, documents=load_sample_corpus())
    budget = ContextBudget.from_config(config, surface="chat")
    context = budget.invoke(
        {"question": question, "documents": retriever.invoke(question)}
    )["context"]
    measured = render(context._repr_html_(), css, browser, args.out)
    print(f"wrote {args.out} ({len(measured['cells'])} cells measured)")


if __name__ == "__main__":
    main()
