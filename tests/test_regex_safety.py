"""Every regular expression run on text from a request, a user, a model or a server is linear.

Issue 19: the pattern that stripped reasoning blocks from a resent ``/v1`` history backtracked
cubically on a repeated unclosed ``<details type='reasoning'`` (25 KB stalled the server for
2.8 s; it holds the GIL). Two kinds of test keep the whole class out:

* each hostile shape found, at 1 MiB, through the real function, under :data:`BOUND_S`
  (today's code takes minutes to days; a timer interrupts it: the regex engine checks signals);
* a scan of every pattern of the package (module-level ``re.compile`` and literal ``re.*``
  calls, found in the source) for the shapes that backtrack super-linearly, read from the
  parsed pattern (``re._parser``): a repeat inside a repeat, two repeats that can split one run
  of characters between them, and a repeat that a search runs again from inside its own run.
  The copies of the old patterns below prove that the scan catches them.
"""

from __future__ import annotations

import ast
import importlib
import random
import re
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from re import _compiler, _constants, _parser  # type: ignore[attr-defined]
from typing import Any

import pytest

import novaberg
from novaberg.backends.guards import says_context_exceeded
from novaberg.echo import EchoFilter, EchoGuard
from novaberg.engine.conversations import history_key, strip_reasoning
from novaberg.prompts.neutral import _RUN, _TEMPLATE_TOKEN, neutralise
from novaberg.redaction import redact, without_userinfo
from novaberg.thinking import _CONTROL, parse_control

BOUND_S = 2.0
"""A linear pass over 1 MiB takes 0.1-0.35 s here, more on a loaded machine (0.5 s was missed
once while two other test runs shared the two cores); a super-linear one takes minutes."""
MIB = 2**20
PACKAGE = Path(novaberg.__file__).parent

OLD_REASONING = re.compile(
    r"<details\b[^>]*type=[\"']reasoning[\"'][^>]*>.*?</details>|<think>.*?</think>",
    re.DOTALL | re.IGNORECASE,
)
OLD_CONTROL = re.compile(
    r"^\s*(?:(?P<tool>TOOL)\s*:\s*(?P<name>[A-Za-z_][\w.-]*)\s*\((?P<args>.*)\)\s*$"
    r"|(?P<result>RESULT|ERGEBNIS)\s*:\s*(?P<verdict>OK|REVISED|ÜBERARBEITET|UEBERARBEITET)\b)",
    re.IGNORECASE | re.MULTILINE,
)
OLD_TEMPLATE_TOKEN = re.compile(
    r"<(?=\s*(?:\||/?\s*(?:tool_call|tool_response|tool_result|think|start_of_turn|"
    r"end_of_turn|s|bos|eos|system|user|assistant)\s*>))",
    re.IGNORECASE,
)
_RUN_CHARS = "=<>\uff1d\ufe66\ua78a\u2550\uff1c\uff1e\ufe64\ufe65\u2039\u203a"
_INVISIBLE = "\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
OLD_RUN = re.compile(f"[{_RUN_CHARS}](?:[{_INVISIBLE}]*[{_RUN_CHARS}]){{2,}}")
OLD_LAST_WORD = re.compile(r"\w+\Z")

EXEMPT: dict[str, str] = {}
"""Patterns the scan flags that are let through, each with the reason."""

BUILT_AT_RUN_TIME: dict[str, Callable[[], list[re.Pattern[str]]]] = {
    "novaberg.redaction._address_pattern": lambda: [
        importlib.import_module("novaberg.redaction")._address_pattern(host)
        for host in ("ollama.internal", "::1")
    ],
}
"""Functions that compile a pattern from a setting: the scan reads what they build for
examples."""


# --- hostile shapes through the real functions ----------------------------------------------


@contextmanager
def finishes_within(seconds: float) -> Iterator[None]:
    """Fail when the block runs longer than ``seconds`` (interrupted then: no waiting for a
    regex that would take days)."""

    def too_slow(signum: int, frame: object) -> None:
        pytest.fail(f"still running after {seconds} s", pytrace=False)

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.perf_counter()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - started < seconds


def mebibyte_of(unit: str, tail: str = "") -> str:
    return unit * (MIB // len(unit)) + tail


@pytest.mark.parametrize(
    "unit",
    [
        "<details type='reasoning'",  # the shape: cubic
        "<think>",  # quadratic
        "<details",  # no ">": quadratic
        "<details type='reasoning'>",  # opened, never closed: quadratic
    ],
)
def test_reasoning_strip_is_linear_on_unclosed_blocks(unit: str) -> None:
    history = [("user", "Hi"), ("assistant", mebibyte_of(unit))]
    with finishes_within(BOUND_S):
        users, pieces = history_key(history)
    assert users == ("Hi",)
    assert list(pieces) == [mebibyte_of(unit).strip()]  # an unclosed block stays text


def test_thinker_control_line_parsing_is_linear_on_blank_lines() -> None:
    with finishes_within(BOUND_S):
        control = parse_control(mebibyte_of("\n", "RESULT: OK"))
    assert control is not None and control.kind == "ok"
    with finishes_within(BOUND_S):
        assert parse_control(mebibyte_of(" \n", "x")) is None


def test_neutralise_is_linear_on_blanks_after_a_less_than_sign() -> None:
    text = "<" + mebibyte_of(" ", "x")  # no template token: every split of the blanks fails
    with finishes_within(BOUND_S):
        assert neutralise(text) == text


@pytest.mark.parametrize("unit", ["a", "a+", "a://", "input length "])
def test_backend_error_texts_are_read_in_linear_time(unit: str) -> None:
    """An upstream server's error text, of any length, is redacted and classified."""
    text = mebibyte_of(unit)
    with finishes_within(BOUND_S):
        redact(text, server="http://user:pw@ollama.internal:11434", name="ollama")
        without_userinfo(text)
    with finishes_within(BOUND_S):
        says_context_exceeded(text)


async def test_echo_filter_is_linear_on_a_long_word_before_punctuation() -> None:
    shown: list[str] = []

    async def show(piece: str) -> None:
        shown.append(piece)

    echo_filter = EchoFilter(
        EchoGuard(["You are Nova, a warm, curious and honest companion."]), show
    )
    with finishes_within(BOUND_S):
        await echo_filter.feed(mebibyte_of("a", "!"))
    assert "".join(shown) == mebibyte_of("a", "!")


# --- the rewrites change nothing on ordinary text -------------------------------------------


def random_texts(fragments: list[str], seed: int, count: int = 20_000) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choice(fragments) for _ in range(rng.randint(0, 14)))


def test_reasoning_strip_removes_what_the_old_pattern_removed() -> None:
    fragments = [
        *("<think>", "</think>", "<THINK>", "</Think>", "<thin\u212a>", "</thin\u212a>"),
        *("<details", "<DETAILS", "<detailsx", "</details>", "</DetailS>", "</detail\u017f>"),
        *(" type=", "TYPE=", "'", '"', "reasoning", "REA\u017fONING", "r\u0130asoning"),
        *("type='reasoning'", '<details type="reasoning">', ">", "<", "/", "x", " ", "\n"),
    ]
    for text in random_texts(fragments, seed=19):
        assert strip_reasoning(text) == OLD_REASONING.sub("", text), text


@pytest.mark.parametrize(
    ("old", "new", "fragments"),
    [
        (
            OLD_CONTROL,
            _CONTROL,
            [
                *("TOOL: x({})", "RESULT: OK", "ERGEBNIS:REVISED", "TOOL", "tool", "RESULT"),
                *("OK", ":", "(", ")", "{}", "x", ".", " ", "\t", "\n", "\r", "\x0b", "\u2028"),
            ],
        ),
        (
            OLD_TEMPLATE_TOKEN,
            _TEMPLATE_TOKEN,
            ["<", ">", "/", "|", "think", "S", "user", "< /", " ", "\t", "\n", "x", "\uff1c"],
        ),
        (OLD_RUN, _RUN, ["<", ">", "=", "\uff1c", "\u200b", "\ufeff", "\u00ad", " ", "x"]),
    ],
    ids=["thinker control line", "template token", "structure run"],
)
def test_linear_patterns_match_what_the_old_ones_matched(
    old: re.Pattern[str], new: re.Pattern[str], fragments: list[str]
) -> None:
    for text in random_texts(fragments, seed=19):
        before = [(m.end(), m.group().strip(), m.groupdict()) for m in old.finditer(text)]
        after = [(m.end(), m.group().strip(), m.groupdict()) for m in new.finditer(text)]
        assert after == before, text


# --- the scan ---------------------------------------------------------------------------------

SAMPLE = frozenset(map(chr, range(0x250))) | frozenset(
    "\u1680\u2000\u2028\u2029\u3000\u200b\u200d\ufeff\u0130\u0131\u212a\u017f\u0663\u4e2d\uff1c"
)
"""The characters tried against each character class of a pattern (plus its own literals)."""
MAX_PATHS = 20_000
REPEATS = (_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT)


@dataclass(frozen=True)
class Atom:
    """One step of a path through a pattern."""

    chars: frozenset[str]
    """What it matches, one character at a time (of :data:`SAMPLE` and the literals)."""
    required: bool
    """It can fail: it must match a character (a repeat: its minimum is not 0), or it is an
    assertion."""
    repeat: bool = False
    """An unbounded repeat."""
    possessive: bool = False
    at: int | None = None
    """The kind of a zero-width assertion (``^``, ``\\b``, ...)."""
    not_after: frozenset[str] = frozenset()
    """A lookbehind ``(?<![...])``: the characters that may not come before."""


def children(op: Any, av: Any) -> list[Any]:
    """The subpatterns inside one parsed item."""
    if op in REPEATS:
        return [av[2]]
    if op is _constants.SUBPATTERN:
        return [av[3]]
    if op is _constants.BRANCH:
        return list(av[1])
    if op in (_constants.ASSERT, _constants.ASSERT_NOT):
        return [av[1]]
    if op is _constants.ATOMIC_GROUP:
        return [av]
    if op is _constants.GROUPREF_EXISTS:
        return [p for p in av[1:] if p is not None]
    return []


def literals(items: Any) -> Iterator[str]:
    """The characters a pattern names (literals, ends and middles of ranges)."""
    for op, av in items:
        if op in (_constants.LITERAL, _constants.NOT_LITERAL):
            yield chr(av)
        elif op is _constants.IN:
            for item_op, item_av in av:
                if item_op is _constants.LITERAL:
                    yield chr(item_av)
                elif item_op is _constants.RANGE:
                    yield from map(chr, (item_av[0], (item_av[0] + item_av[1]) // 2, item_av[1]))
        for child in children(op, av):
            yield from literals(child)


class Paths:
    """Every way through one pattern, as a sequence of atoms (alternatives expanded; a bounded
    repeat taken once, or not at all when it may be absent)."""

    def __init__(self, alphabet: frozenset[str]) -> None:
        self.alphabet = alphabet

    def chars(self, item: Any, flags: int) -> frozenset[str]:
        state = _parser.State()
        state.flags = flags
        one = _compiler.compile(_parser.SubPattern(state, [item]), flags)
        return frozenset(ch for ch in self.alphabet if one.fullmatch(ch))

    def of(self, items: Any, flags: int) -> list[list[Atom]]:
        paths: list[list[Atom]] = [[]]
        for op, av in items:
            paths = [path + rest for path in paths for rest in self.item(op, av, flags)]
            assert len(paths) <= MAX_PATHS, "a pattern too branched for this scan"
        return paths

    def item(self, op: Any, av: Any, flags: int) -> list[list[Atom]]:
        c = _constants
        if op in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN):
            return [[Atom(self.chars((op, av), flags), required=True)]]
        if op is c.AT:
            if av == c.AT_BEGINNING and flags & re.MULTILINE:
                av = c.AT_BEGINNING_LINE  # as the compiler reads it
            return [[Atom(frozenset(), required=True, at=av)]]
        if op in REPEATS:
            low, high, body = av
            inside = self.of(body, flags)
            if high == c.MAXREPEAT:
                chars = frozenset().union(*(a.chars for path in inside for a in path))
                possessive = op is c.POSSESSIVE_REPEAT
                return [[Atom(chars, low > 0, repeat=True, possessive=possessive)]]
            return ([[]] if low == 0 else []) + inside
        if op is c.SUBPATTERN:
            return self.of(av[3], (flags | av[1]) & ~av[2])
        if op is c.ASSERT and av[0] == 1:
            return self.of(av[1], flags)  # a lookahead reads on like the pattern
        if op is c.ASSERT_NOT and av[0] == -1 and len(av[1]) == 1:
            not_after = self.chars(av[1][0], flags)
            return [[Atom(frozenset(), required=True, at=-1, not_after=not_after)]]
        if op in (c.ASSERT, c.ASSERT_NOT):
            return [[Atom(frozenset(), required=True, at=-1)]]
        if op in (c.BRANCH, c.ATOMIC_GROUP, c.GROUPREF_EXISTS):
            return [path for child in children(op, av) for path in self.of(child, flags)]
        if op is c.GROUPREF:
            return [[Atom(self.alphabet, required=True)]]
        raise AssertionError(f"the scan does not know {op}: teach it")


def nested_repeat(items: Any, inside: bool = False) -> bool:
    """Whether an unbounded repeat that can give characters back lies inside another
    unbounded repeat (``(a*)*``, ``(\\s*x)+``: exponential or polynomial backtracking)."""
    for op, av in items:
        unbounded = op in REPEATS and av[1] == _constants.MAXREPEAT
        if unbounded and inside and op is not _constants.POSSESSIVE_REPEAT:
            return True
        if any(nested_repeat(child, inside or unbounded) for child in children(op, av)):
            return True
    return False


def overlapping_alternatives(items: Any, paths: Paths, flags: int) -> bool:
    """Whether an unbounded repeat holds alternatives that can begin with the same character
    (``(a|aa)+``: a run splits into iterations in exponentially many ways)."""
    for op, av in items:
        if op in REPEATS and av[1] == _constants.MAXREPEAT:
            starts = [first_chars(path) for path in paths.of(av[2], flags)]
            if any(a & b for i, a in enumerate(starts) for b in starts[i + 1 :]):
                return True
        if any(overlapping_alternatives(child, paths, flags) for child in children(op, av)):
            return True
    return False


def first_chars(path: list[Atom]) -> frozenset[str]:
    """The characters a path can begin with."""
    chars: frozenset[str] = frozenset()
    for atom in path:
        chars |= atom.chars
        if atom.required and atom.at is None:
            break
    return chars


def can_fail(atoms: list[Atom]) -> bool:
    return any(a.required for a in atoms)


def within(atoms: list[Atom], chars: frozenset[str]) -> bool:
    """Whether ``atoms`` can match using only ``chars`` (assertions are taken to pass)."""
    return all(not a.required or a.at is not None or a.chars & chars for a in atoms)


def split_run(path: list[Atom]) -> str | None:
    """Two repeats that can split one run of characters between them in many ways, something
    after them failing each time: quadratic in one attempt (``[^>]*type=...[^>]*>``)."""
    for i, first in enumerate(path):
        if not first.repeat or first.possessive:
            continue
        for j in range(i + 1, len(path)):
            second = path[j]
            shared = first.chars & second.chars
            if (
                second.repeat
                and shared
                and within(path[i + 1 : j], shared)
                and can_fail(path[j + 1 :])
            ):
                return f"repeats {i} and {j} can split one run between them"
    return None


def restarted_run(path: list[Atom]) -> str | None:
    """A repeat whose run holds where a search starts its next attempt (the part of the
    pattern before the repeat fits inside the run), something after it failing each time:
    every attempt reads the run again (``<think>.*?</think>``, ``\\w+\\Z``, ``^\\s*x`` under
    MULTILINE)."""
    start = path[0].at if path and path[0].at is not None else None
    if start in (_constants.AT_BEGINNING, _constants.AT_BEGINNING_STRING):
        return None  # one attempt only
    for k, atom in enumerate(path):
        if not atom.repeat or not can_fail(path[k + 1 :]):
            continue
        if path[0].not_after and atom.chars <= path[0].not_after:
            continue  # an attempt inside the run fails at once: ``(?<![\w.])\w[\w.]*:``
        if start == _constants.AT_BEGINNING_LINE and "\n" not in atom.chars:
            continue  # attempts start after a line break, which the run does not hold
        if within(path[:k], atom.chars):
            return f"repeat {k} runs over the start of the next attempt"
    return None


def problems(pattern: str, flags: int) -> list[str]:
    """What makes ``pattern`` backtrack super-linearly (empty: linear)."""
    parsed = _parser.parse(pattern, flags)
    paths = Paths(SAMPLE | frozenset(literals(parsed)))
    found = ["a repeat inside a repeat"] if nested_repeat(parsed) else []
    if overlapping_alternatives(parsed, paths, parsed.state.flags):
        found.append("a repeat of alternatives that overlap")
    for path in paths.of(parsed, parsed.state.flags):
        found += [p for p in (split_run(path), restarted_run(path)) if p]
    return sorted(set(found))


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        pytest.param(OLD_REASONING, "can split one run", id="old reasoning: cubic"),
        pytest.param(OLD_REASONING, "runs over the start", id="old reasoning: searched"),
        pytest.param(OLD_CONTROL, "runs over the start", id="old control line"),
        pytest.param(OLD_TEMPLATE_TOKEN, "can split one run", id="old template token"),
        pytest.param(OLD_RUN, "a repeat inside a repeat", id="old structure run"),
        pytest.param(OLD_LAST_WORD, "runs over the start", id="old last word"),
        pytest.param(re.compile(r"^(a+)+$"), "a repeat inside a repeat", id="(a+)+"),
        pytest.param(re.compile(r"^(?:a|aa)+$"), "alternatives that overlap", id="(a|aa)+"),
    ],
)
def test_scan_flags_patterns_that_backtrack_super_linearly(
    pattern: re.Pattern[str], problem: str
) -> None:
    assert any(problem in p for p in problems(pattern.pattern, pattern.flags))


@pytest.mark.parametrize(
    "pattern",
    [
        r"\w+",
        r'"[^"]*"',
        r"\n[ \t]*---[ \t]*\n",
        r"^\s*(\d{1,6})\s*([dhm])\s*$",
        r"[ \t]{2,}",
        r"(?<![\w.])[a-z][\w.]*:",
    ],
)
def test_scan_passes_linear_patterns(pattern: str) -> None:
    assert problems(pattern, 0) == []


PATTERN_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "split"}
PATTERN_CALLS |= {"findall", "finditer"}
FLAGS_AT = {"compile": 1, "sub": 4, "subn": 4, "split": 3}
"""Where the flags stand among the positional arguments (else third)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def re_call(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "re"
        and node.func.attr in PATTERN_CALLS
    ):
        return node.func.attr
    return None


def literal_flags(call: ast.Call, function: str) -> int:
    given = [k.value for k in call.keywords if k.arg == "flags"]
    at = FLAGS_AT.get(function, 2)
    given += call.args[at : at + 1]
    if not given:
        return 0
    value = eval(compile(ast.Expression(given[0]), "<flags>", "eval"), {"re": re})
    return int(value)


def package_patterns() -> Iterator[tuple[str, str, int]]:
    """(where, pattern, flags) of every pattern in the package's source: module-level
    ``re.compile`` (read from the imported module) and ``re.*`` calls with a literal pattern;
    anything else fails, so that no pattern escapes the scan."""
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                modules.append(getattr(node, "module", None) or "")
                assert not {"regex", "re2", "sre_compile", "sre_parse"} & set(modules), name
                assert not (isinstance(node, ast.ImportFrom) and node.module == "re"), name
                assert all(a.asname is None for a in node.names if a.name == "re"), name
        bound: dict[int, str] = {}
        for statement in tree.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], statement.value
                pairs = (
                    zip(target.elts, value.elts, strict=True)
                    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                    else [(target, value)]
                )
                for one, call in pairs:
                    if re_call(call) == "compile" and isinstance(one, ast.Name):
                        bound[id(call)] = one.id
        module = importlib.import_module(name) if bound else None
        owner = {
            id(inner): f"{name}.{function.name}"
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
            for inner in ast.walk(function)
        }
        for node in ast.walk(tree):
            function = re_call(node)
            if function is None or not isinstance(node, ast.Call):
                continue
            first = node.args[0] if node.args else None
            if id(node) in bound:
                compiled = getattr(module, bound[id(node)])
                yield f"{name}.{bound[id(node)]}", compiled.pattern, compiled.flags
            elif isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield f"{name}:{node.lineno}", first.value, literal_flags(node, function)
            elif owner.get(id(node)) in BUILT_AT_RUN_TIME:
                for built in BUILT_AT_RUN_TIME[owner[id(node)]]():
                    yield owner[id(node)], built.pattern, built.flags
            else:
                raise AssertionError(
                    f"{name}:{node.lineno}: compile patterns at module level, bound to a name, "
                    "pass a literal, or add the function to BUILT_AT_RUN_TIME: the scan cannot "
                    "read this one"
                )


def test_scan_reads_the_package_patterns() -> None:
    found = {where for where, _, _ in package_patterns()}
    assert {
        "novaberg.engine.conversations._RULE",
        "novaberg.thinking._CONTROL",
        "novaberg.prompts.neutral._TEMPLATE_TOKEN",
        "novaberg.prompts.neutral._RUN",
    } <= found
    assert any(where.startswith("novaberg.echo:") for where in found)  # a literal re.sub


def test_no_pattern_of_the_package_backtracks_super_linearly() -> None:
    flagged = {
        where: found
        for where, pattern, flags in package_patterns()
        if (found := problems(pattern, flags))
    }
    assert {w: p for w, p in flagged.items() if w not in EXEMPT} == {}
    assert sorted(set(EXEMPT) - set(flagged)) == [], "an exemption no longer needed"
