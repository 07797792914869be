"""Modules that moved into packages in 0.2.0 keep answering to their old names until 0.3.0,
with a warning that names the new one: a team's plugin that imported ``orion.plugins`` keeps
working while its authors move to ``orion.api``."""

import subprocess
import sys

import pytest

import orion


@pytest.mark.parametrize("old, new", sorted(orion.MOVED_MODULES.items()))
def test_an_old_module_name_is_the_new_module_with_a_warning(old: str, new: str) -> None:
    program = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "assert old is new, (old, new)\n"
        f"assert new.__spec__.name == {new!r}, new.__spec__\n"
        "messages = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        "print(messages[0])\n")
    # A process of its own: in this one the old name may have been imported already.
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"{old} moved to {new} in 0.2.0; the old name goes in "
                                   "0.3.0 (orion.api is the import path that stays)")


def test_no_old_name_is_a_module_of_its_own() -> None:
    """Each old name leads to the one module that moved: none is still a file of orion/."""
    from pathlib import Path
    top = Path(orion.__file__).parent
    for old in orion.MOVED_MODULES:
        assert not (top / f"{old.split('.', 1)[1].replace('.', '/')}.py").exists(), old
