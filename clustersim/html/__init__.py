"""Self-contained HTML reports (`--html FILE` on run, sweep and compare); see docs/html.md.

page.py           the page shell: inline BokehJS, CSS, charts as JSON items, a CSP that forbids fetches
charts.py         Bokeh charts as deterministic JSON items
timeline_data.py  the event engine's segments as lanes of blocks, merged to a size budget
fragments.py      HTML pieces (numbers, interval, tables) shared with the web app and notebooks
run_page.py, sweep_page.py, compare_page.py   one page per command
notebook.py       `_repr_html_` of reports in Jupyter (no scripts)
sweep_notebook.py `_repr_html_` of sweep results in Jupyter
"""

from clustersim.html.page import check_html_path, write_html

__all__ = ["check_html_path", "write_html"]
