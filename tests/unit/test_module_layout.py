"""The product's layout stays findable (docs/decisions/0030-one-door-per-concept.md):

- one door to the store: only the services, the composition root and persistence itself import
  `onboarding.persistence`; of a turn's modules, only the service (which is handed the
  repositories) and `turn.store` (the turn's door to them);
- one name per concept: no two modules or packages of the library have a word in common in their
  names (words sharing their first four letters count as one: `erasing` and `erasure`);
- one home for our words: a module-level text that reads as a sentence is in `replies.py` (what
  the person reads that we write) or `llm/wording.py` (what the model reads), nowhere else;
- a module over 500 lines is a smell to look at, not a cap to split by: it fails here until it is
  either made smaller for a reason of its own or named below with why it is one idea.
"""

import ast
import re
from itertools import combinations
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "layers" / "onboarding" / "onboarding"
SMELL_LINES = 500
# A module over SMELL_LINES that is one idea, and why (none today).
ONE_IDEA_THOUGH_LONG: dict[str, str] = {}

# Who may import onboarding.persistence: the services, the composition root, persistence itself.
STORE_DOOR = (
    "onboarding.persistence",
    "onboarding.turn.service",
    "onboarding.turn.store",
    "onboarding.account",
    "onboarding.linking",
    "onboarding.recall.indexer",
    "onboarding.checkins.outreach",
    "onboarding.composition",
)
# The five agents: their names are the onboarding's five steps (two end in "planning"; both are steps, not a concept);
# and the check-in's agent beside them (its concept's home is `checkins/`).
SPEC_NAMES = {"diet_planning", "fitness_assessment", "goal_setting", "scheduling", "workout_planning", "check_in"}
SAME_CONCEPT_PREFIX = 4
# A service and the repository that stores its concept share the concept's word, by design: the
# newcomer looking for where links are stored guesses the service's word. Each pair, and why.
SERVICE_AND_ITS_STORE = {
    ("linking", "persistence.link_requests"): "linking's pending links and counted codes, in the table",
}
# Names that share their first letters but not their meaning, and what each means.
NOT_ONE_CONCEPT = {
    ("llm.converse", "persistence.conversations"): "Bedrock's Converse API; a user's stored conversation",
}


def _module_name(path: Path, root: Path, prefix: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return prefix + ".".join(parts)


def product_modules() -> dict[str, Path]:
    roots = {REPO / "layers" / "onboarding": "", REPO / "functions": "functions."}
    return {_module_name(p, root, prefix): p for root, prefix in roots.items() for p in sorted(root.rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy and TYPE_CHECKING imports count)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def store_door_breaches(modules: dict[str, Path]) -> list[str]:
    def inside(module: str, allowed: str) -> bool:
        return module == allowed or module.startswith(f"{allowed}.")

    return sorted(
        f"{module} imports {target}"
        for module, path in modules.items()
        if not any(inside(module, allowed) for allowed in STORE_DOOR)
        for target in imports_of(path)
        if inside(target, "onboarding.persistence")
    )


def test_only_the_services_import_the_store() -> None:
    assert store_door_breaches(product_modules()) == []


def test_the_store_door_test_finds_a_bypass(tmp_path: Path) -> None:
    """The check itself: an SMS module that reads a repository is named."""
    bypass = tmp_path / "intake.py"
    bypass.write_text("from onboarding.persistence import Repositories\n", encoding="utf-8")
    assert store_door_breaches({"onboarding.sms.intake": bypass}) == [
        "onboarding.sms.intake imports onboarding.persistence",
        "onboarding.sms.intake imports onboarding.persistence.Repositories",
    ]


def test_a_running_turn_reaches_the_table_only_through_its_door(tmp_path: Path) -> None:
    """The turn in progress and its fold hold a `TurnStore`, never the repositories."""
    bypass = tmp_path / "fold.py"
    bypass.write_text("from onboarding.persistence import Repositories\n", encoding="utf-8")
    assert store_door_breaches({"onboarding.turn.fold": bypass}) != []


def _words(name: str) -> set[str]:
    return {word for word in name.split("_") if word}


def _same_concept(a: str, b: str) -> bool:
    if len(a) < SAME_CONCEPT_PREFIX or len(b) < SAME_CONCEPT_PREFIX:
        return a == b
    return a[:SAME_CONCEPT_PREFIX] == b[:SAME_CONCEPT_PREFIX]


def concept_clashes(names: dict[str, str]) -> list[str]:
    """Pairs of library modules or packages (dotted path -> its last name) whose names share a
    word, a module and its own package aside."""
    clashes = []
    for (path_a, name_a), (path_b, name_b) in combinations(sorted(names.items()), 2):
        if path_b.startswith(f"{path_a}.") or path_a.startswith(f"{path_b}."):
            continue  # recall/recaller.py: a module of its own concept's package
        if (path_a, path_b) in SERVICE_AND_ITS_STORE or (path_a, path_b) in NOT_ONE_CONCEPT:
            continue
        if any(_same_concept(x, y) for x in _words(name_a) for y in _words(name_b)):
            clashes.append(f"{path_a} ~ {path_b}")
    return clashes


def library_names() -> dict[str, str]:
    names = {}
    for path in LIBRARY.rglob("*.py"):
        parts = path.relative_to(LIBRARY).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for depth in range(1, len(parts) + 1):
            dotted = ".".join(parts[:depth])
            if parts[depth - 1] not in SPEC_NAMES:
                names[dotted] = parts[depth - 1]
    return names


def test_each_concept_has_one_name_in_the_library() -> None:
    assert len(library_names()) > 50
    assert concept_clashes(library_names()) == []


def test_the_concept_test_finds_near_names() -> None:
    """The check itself, on the pairs that once made a newcomer look in three places."""
    assert concept_clashes({"erasing": "erasing", "persistence.erasure": "erasure"}) == [
        "erasing ~ persistence.erasure"
    ]
    assert concept_clashes({"recall": "recall", "memory.recall": "recall"}) == ["memory.recall ~ recall"]
    assert concept_clashes({"turn_writes": "turn_writes", "merge_writes": "merge_writes"}) != []
    assert concept_clashes({"recall": "recall", "recall.recaller": "recaller"}) == []
    assert concept_clashes({"linking": "linking", "persistence.link_requests": "link_requests"}) == []
    assert concept_clashes({"linking": "linking", "persistence.link_codes": "link_codes"}) != []


def test_a_long_module_is_one_idea_or_it_is_looked_at() -> None:
    modules = [*(REPO / "layers").rglob("*.py"), *(REPO / "functions").rglob("*.py")]
    assert len(modules) > 50
    long = {
        rel: n
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > SMELL_LINES
        and (rel := str(p.relative_to(REPO))) not in ONE_IDEA_THOUGH_LONG
    }
    assert not long, f"over {SMELL_LINES} lines (make it smaller, or say why it is one idea): {long}"


# Where the texts we write live: what the person reads, and what the model reads.
WORDS_HOMES = ("replies.py", "llm/wording.py")
_SENTENCE = re.compile(r"^[A-Z(].*\s.*[.?!:)]\s*$", re.DOTALL)


def stray_sentences(modules: dict[str, Path]) -> list[str]:
    """Module-level constants of four words or more that read as a sentence or a header, outside
    the two homes of our words (`modules`: path relative to the library -> file)."""
    found = []
    for name, path in sorted(modules.items()):
        if name in WORDS_HOMES:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                for constant in ast.walk(node.value):
                    text = constant.value if isinstance(constant, ast.Constant) else None
                    if isinstance(text, str) and len(text.split()) >= 4 and _SENTENCE.match(text):
                        found.append(f"{name}:{node.lineno}: {text[:40]}")
    return found


def test_every_text_we_write_lives_in_one_of_two_homes() -> None:
    modules = {p.relative_to(LIBRARY).as_posix(): p for p in LIBRARY.rglob("*.py")}
    assert stray_sentences(modules) == []


def test_the_words_test_finds_a_reply_written_beside_its_code(tmp_path: Path) -> None:
    stray = tmp_path / "intake.py"
    stray.write_text('LINKED = "Linked! Texts from this phone now continue your conversation."\n', encoding="utf-8")
    assert stray_sentences({"sms/intake.py": stray}) == ["sms/intake.py:1: Linked! Texts from this phone now contin"]


# The time a delivery answers a client message id is its `lease` (the stored attributes `lease`
# and `lease_until_ms`, `Limits.turn_lease_s`): no other word names it in the code.
LEASE_SYNONYMS = re.compile(r"claim|(?<!thres)(?<!place)hold(?!er)|held", re.IGNORECASE)


def lease_synonyms(modules: dict[str, Path]) -> list[str]:
    """Names (functions, classes, arguments, variables, attributes) that call the lease by another word."""
    found = []
    for name, path in sorted(modules.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = (
                node.name
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                else node.arg
                if isinstance(node, ast.arg)
                else node.id
                if isinstance(node, ast.Name)
                else node.attr
                if isinstance(node, ast.Attribute)
                else None
            )
            if named and LEASE_SYNONYMS.search(named):
                found.append(f"{name}:{getattr(node, 'lineno', 0)}: {named}")
    return sorted(set(found))


def test_the_message_id_lease_has_one_name() -> None:
    assert lease_synonyms(product_modules()) == []


def test_the_lease_test_finds_another_word_for_it(tmp_path: Path) -> None:
    stray = tmp_path / "writes.py"
    stray.write_text("def claim_user_message(user_id, holder): return refuse_while_held(user_id)\n", encoding="utf-8")
    assert lease_synonyms({"persistence.writes": stray}) == [
        "persistence.writes:1: claim_user_message",
        "persistence.writes:1: refuse_while_held",
    ]
