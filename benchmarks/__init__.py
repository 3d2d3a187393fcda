"""Product benchmarks: scripts that print the figures users feel (docs/benchmarks.md).

Run each from the repository root as a module, `.venv/bin/python -m benchmarks.NAME`: the root
is then importable, so a benchmark imports the tests' fake servers as `tests.support.fake_openai`
etc.
"""
