"""What the engine warms at start (memora.textnorm.warm, on a thread while the store
opens) leaves nothing for the process's first search to load: simplemma's English dictionary,
which that search used to load itself (the first search after a restart at 10,000 memories,
benchmarks/retrieval_overhead.py)."""

from __future__ import annotations

import subprocess
import sys

# In a fresh interpreter: warm (or not), then make loading a dictionary from disk fail, and
# stem and tokenize the way a search and a lexical index do.
SCRIPT = """
import sys
import simplemma.strategies.dictionaries.dictionary_factory as factory
from memora import textnorm
from memora.longterm import lexical

if sys.argv[1] == "warm":
    textnorm.warm()

def refused(lang):
    raise RuntimeError(f"loaded the {lang} dictionary during a search")

factory._load_dictionary_from_disk = refused
print(textnorm.stem("studies"), lexical.tokenize("The user studies English at night"))
"""


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=120
    )


def test_warming_loads_the_stemmers_dictionary_before_the_first_search() -> None:
    for mode in ("warm",):
        warmed = run(mode)
        assert warmed.returncode == 0, warmed.stderr
        assert warmed.stdout.startswith("studi ")  # the lemma's stem: studies → study → studi
    cold = run("none")  # the same script without warming: the search loads it
    assert cold.returncode != 0
    assert "loaded the en dictionary during a search" in cold.stderr
