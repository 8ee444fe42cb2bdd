"""Draw the picture of the README's "Use from Jupyter": a budgeted context's display.

The HTML is exactly what a notebook shows for `BudgetedContext` (its
`_repr_html_`), for the demo's question through the demo's tight `chat` surface;
`wkhtmltoimage` (apt: wkhtmltopdf) turns it into a PNG.

    python docs/evidence_table.py [--out docs/evidence_table.png]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from langchain_ragbudget import ContextBudget, build_hybrid_retriever, load_config
from langchain_ragbudget.sample import (
    demo_config_path,
    load_sample_corpus,
    load_sample_questions,
)

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ font-family: "DejaVu Sans", sans-serif; font-size: 13px; margin: 16px; }}
</style></head><body>{body}</body></html>"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/evidence_table.png"))
    args = parser.parse_args()
    tool = shutil.which("wkhtmltoimage")
    if tool is None:
        raise SystemExit("needs wkhtmltoimage (apt install wkhtmltopdf)")
    config = load_config(demo_config_path())
    question = load_sample_questions()[0]["question"]
    retriever = build_hybrid_retriever(load_sample_corpus(), config)
    budget = ContextBudget.from_config(config, surface="chat")
    context = budget.invoke(
        {"question": question, "documents": retriever.invoke(question)}
    )["context"]
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "context.html"
        page.write_text(PAGE.format(body=context._repr_html_()), encoding="utf-8")
        subprocess.run(
            [tool, "--quiet", "--width", "1100", str(page), str(args.out)],
            check=True,
            timeout=120,
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
