"""Runs a notebook's code cells as a plain script, in order, in one namespace (what CI does with
docs/examples/*.ipynb, without a Jupyter install). A cell's last expression is displayed as a
notebook would: its HTML or SVG is rendered, and must not be empty.

    python docs/examples/run_notebook.py NOTEBOOK.ipynb
"""

import ast
import json
import sys


def display(value):
    for method in ("_repr_html_", "_repr_svg_"):
        render = getattr(value, method, None)
        if render is not None:
            out = render()
            assert out and out.strip(), f"{type(value).__name__}.{method}() is empty"
            return f"{type(value).__name__}: {method}, {len(out)} characters"
    return repr(value)[:200]


def main(path):
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    ns = {"__name__": "__main__"}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse("".join(cell["source"]), filename=f"{path} cell {i}")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, f"{path} cell {i}", "exec"), ns)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), f"{path} cell {i}", "eval"), ns)
            print(f"[{i}] {display(value)}")
    print(f"{path}: every cell ran")


if __name__ == "__main__":
    main(sys.argv[1])
