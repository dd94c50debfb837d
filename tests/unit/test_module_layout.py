"""The product stays small and findable: no module in layers/ or functions/ over 300 lines, and no
two modules of the domain library share a name (a newcomer finds each by its name alone)."""

from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "layers" / "onboarding" / "onboarding"
MOST_LINES = 300


def test_no_product_module_is_over_300_lines() -> None:
    modules = [*(REPO / "layers").rglob("*.py"), *(REPO / "functions").rglob("*.py")]
    assert len(modules) > 50
    long = {
        str(p.relative_to(REPO)): n
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MOST_LINES
    }
    assert not long, f"modules over {MOST_LINES} lines: {long}"


def test_no_two_library_modules_share_a_name() -> None:
    names = Counter(p.name for p in LIBRARY.rglob("*.py") if p.name != "__init__.py")
    assert not [name for name, count in names.items() if count > 1]
