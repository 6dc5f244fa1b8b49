"""`clustersim serve`: a local web app for what-if exploration; see docs/html.md.

requests.py  what a request may hold: size, JSON, keys, scenario (as the CLI checks it), file names
predict.py   the answers (closed form, event engine, YAML, save), as plain functions
page.py      the single page (controls; sections rendered by clustersim/html/run_page.py)
app.py       the Starlette routes; uvicorn serves them (clustersim/cli/serve_cmd.py)
"""
